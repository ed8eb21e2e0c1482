// A real OpenID provider for the tests: npm's oidc-provider with the device authorization grant,
// its development login pages (any password), the people of ACCOUNTS_FILE (read again on every
// sign-in and refresh, so a test moves a person out of a group, or disables them, by rewriting it),
// and the signing keys of JWKS_FILE (the test holds the private key too, to forge tokens with it).
// A confidential client, RUNNER_CLIENT (its secret RUNNER_SECRET, holding characters RFC 6749 has
// encoded before HTTP Basic), takes the client credentials grant for the scope tickets:write, and
// introspects the tokens it was given: the API of a test checks a runner's bearer token that way.
//
//   node oidc_provider.mjs MODULE_DIR PORT ACCOUNTS_FILE JWKS_FILE ID_TOKEN_SECONDS
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const [moduleDir, port, accountsFile, jwksFile, idTokenSeconds] = process.argv.slice(2);
const { default: Provider } = await import(pathToFileURL(`${moduleDir}/lib/index.js`).href);
const issuer = `http://127.0.0.1:${port}`;
const people = () => JSON.parse(readFileSync(accountsFile, 'utf8'));
const publicClient = (clientId) => ({
  client_id: clientId,
  token_endpoint_auth_method: 'none',
  grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'],
  response_types: [],
  redirect_uris: [],
});

export const RUNNER_CLIENT = 'ticket-runner';
export const RUNNER_SECRET = 'r:u/n+n%er secret';
const runner = {
  client_id: RUNNER_CLIENT,
  client_secret: RUNNER_SECRET,
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  scope: 'tickets:write',
};

const provider = new Provider(issuer, {
  clients: [publicClient('reviewer-cli'), publicClient('another-app'), runner],
  jwks: JSON.parse(readFileSync(jwksFile, 'utf8')),
  features: {
    deviceFlow: { enabled: true },
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
  },
  scopes: ['openid', 'email', 'groups', 'offline_access', 'tickets:write'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  conformIdTokenClaims: false,
  ttl: {
    IdToken: Number(idTokenSeconds),
    AccessToken: 300,
    ClientCredentials: 300,
    DeviceCode: 600,
    RefreshToken: 86400,
    Grant: 86400,
    Session: 86400,
    Interaction: 600,
  },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  cookies: { keys: ['cookies of a provider that lives for one test run'] },
  async findAccount(ctx, id) {
    const person = people()[id];
    if (!person || person.disabled) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: person.email, email_verified: true, groups: person.groups };
      },
    };
  },
});
// The grant's poll interval: RFC 8628 lets the provider name it, and this one names 1 s rather than
// the default 5, so a test's sign-in takes a second.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/device/auth' && ctx.status === 200) ctx.body = { ...ctx.body, interval: 1 };
});
provider.listen(Number(port), '127.0.0.1', () => console.log(`serving ${issuer}`));
