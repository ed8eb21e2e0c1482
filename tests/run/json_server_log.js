// json-server's log of the writes it performed, for the tests: each write it answered with a success
// (json-server knows no dry run, so each one was kept), with its time and the X-Request-Id it was sent
// with, served as JSON at /_log in the sample API's shape, read by `reviewer run --audit api:/_log`.
const entries = [];

module.exports = (request, response, next) => {
  if (request.path === "/_log") {
    response.json({ entries });
    return;
  }
  if (!["GET", "HEAD", "OPTIONS"].includes(request.method)) {
    response.on("finish", () => {
      if (response.statusCode >= 400) {
        return;
      }
      entries.push({
        at: new Date().toISOString(),
        method: request.method,
        path: request.path,
        query: request.query,
        status: response.statusCode,
        request_id: request.get("x-request-id") || null,
      });
    });
  }
  next();
};
