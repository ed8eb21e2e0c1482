// json-server's access log for the tests: every write it answered (method, path, query, status),
// served as JSON at /_log, the way an API's audit log is read by `reviewer run --audit`.
const entries = [];

module.exports = (request, response, next) => {
  if (request.path === "/_log") {
    response.json({ entries });
    return;
  }
  if (!["GET", "HEAD", "OPTIONS"].includes(request.method)) {
    response.on("finish", () => {
      entries.push({
        method: request.method,
        path: request.path,
        query: request.query,
        status: response.statusCode,
      });
    });
  }
  next();
};
