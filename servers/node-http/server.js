'use strict';
// node-http: the Node.js `http` server under test of xferlab's HTTP upload lab (seed 002:
// "Node.js, 4 instances round-robin" is `--workers 4`: the cluster module's primary
// accepts and hands connections to the workers round-robin). Core modules only.
//
//   PUT  /uploads/<name>  body -> HOME/uploads/<name>, 201 (400 for a name with '/' or '..')
//   POST /uploads/        body -> HOME/uploads/p-<pid hex>-<n>, a new file, 201 + Location
//   GET  /<path>          the file HOME/<path> (streamed: Node has no sendfile)
//   HEAD /                the readiness probe: with --workers N, 503 Service Unavailable until
//                         the primary has seen all N workers listening (before that the primary
//                         would hand connections only to the workers already listening)
// A body over --max-body bytes: 413, nothing kept. With --tls-cert and --tls-key (PEM files,
// both or neither) the listener speaks HTTPS (the `https` module, TLS 1.2/1.3, HTTP/1.1) instead;
// with --workers N each worker does its connections' TLS.
//
// usage: node server.js --host H --port P --home DIR [--workers N] [--max-body BYTES]
//                       [--keepalive 0|1] [--backlog N] [--tls-cert PEM --tls-key PEM]
const cluster = require('cluster');
const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');

function parseArgs(argv) {
  const o = { host: '127.0.0.1', port: 8080, home: '.', workers: 1, maxBody: 1 << 30, keepalive: true,
              backlog: 4096, tlsCert: '', tlsKey: '' };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`${k}: missing value`);
    if (k === '--host') o.host = v;
    else if (k === '--port') o.port = Number(v);
    else if (k === '--home') o.home = path.resolve(v);
    else if (k === '--workers') o.workers = Number(v);
    else if (k === '--max-body') o.maxBody = Number(v);
    else if (k === '--keepalive') o.keepalive = v !== '0' && v !== 'false';
    else if (k === '--backlog') o.backlog = Number(v);
    else if (k === '--tls-cert') o.tlsCert = v;
    else if (k === '--tls-key') o.tlsKey = v;
    else throw new Error(`unknown option ${k}`);
  }
  if (!o.tlsCert !== !o.tlsKey) {
    throw new Error(`--tls-cert and --tls-key go together (got cert '${o.tlsCert}', key '${o.tlsKey}')`);
  }
  return o;
}

const opt = parseArgs(process.argv);
const uploads = path.join(opt.home, 'uploads');
let counter = 0;
// A worker of a cluster learns from the primary when every worker listens; a single process is
// ready once it listens (it answers nothing before).
let allListening = !cluster.isWorker;
if (cluster.isWorker) {
  process.on('message', (m) => { if (m === 'xferlab:all-listening') allListening = true; });
}

function reply(res, status, extra) {
  const body = `${status} ${http.STATUS_CODES[status]}\n`;
  const headers = { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body),
                    ...extra };
  if (!opt.keepalive || status === 413) headers.Connection = 'close';
  res.writeHead(status, headers);
  res.end(body);
}

function store(req, res, file, flags, location) {
  const declared = Number(req.headers['content-length'] || 0);
  if (declared > opt.maxBody) return reply(res, 413);
  const ws = fs.createWriteStream(file, { flags });
  let got = 0, failed = false;
  const fail = (status) => {
    if (failed) return;
    failed = true;
    req.unpipe(ws);
    ws.destroy();
    fs.unlink(file, () => reply(res, status));
  };
  ws.on('error', (e) => fail(e.code === 'EEXIST' ? 409 : 500));
  req.on('data', (chunk) => {
    got += chunk.length;
    if (got > opt.maxBody) fail(413);
  });
  req.on('error', () => fail(400));
  ws.on('finish', () => { if (!failed) reply(res, 201, { Location: location }); });
  req.pipe(ws);
}

function serveFile(req, res, urlPath) {
  const file = path.join(opt.home, path.posix.normalize(urlPath));
  if (file !== opt.home && !file.startsWith(opt.home + path.sep)) return reply(res, 403);
  fs.open(file, 'r', (err, fd) => {
    if (err) return reply(res, err.code === 'ENOENT' || err.code === 'ENOTDIR' ? 404 : 403);
    fs.fstat(fd, (e2, st) => {
      if (e2 || !st.isFile()) { fs.close(fd, () => {}); return reply(res, e2 ? 500 : 403); }
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': st.size,
                           ...(opt.keepalive ? {} : { Connection: 'close' }) });
      if (req.method === 'HEAD' || st.size === 0) { fs.close(fd, () => {}); return res.end(); }
      fs.createReadStream(null, { fd, highWaterMark: 256 * 1024 }).pipe(res);
    });
  });
}

function handle(req, res) {
  let p;
  try {
    // the raw target, not new URL(): that would resolve a ".." segment away
    const raw = req.url.startsWith('/') ? req.url : new URL(req.url).pathname;
    p = decodeURIComponent(raw.split('?', 1)[0]);
  } catch (e) {
    return reply(res, 400);
  }
  if (p.includes('\0') || p.split('/').includes('..')) return reply(res, 400);
  if (!allListening && req.method === 'HEAD' && p === '/') return reply(res, 503, { 'Retry-After': '1' });
  if (req.method === 'GET' || req.method === 'HEAD') return serveFile(req, res, p);
  if (req.method === 'PUT') {
    if (!p.startsWith('/uploads/')) return reply(res, 403);
    const name = p.slice('/uploads/'.length);
    if (!name || name === '.' || name.includes('/')) return reply(res, 400);
    return store(req, res, path.join(uploads, name), 'w', `/uploads/${encodeURIComponent(name)}`);
  }
  if (req.method === 'POST') {
    if (p !== '/uploads/' && p !== '/uploads') return reply(res, 403);
    const name = `p-${process.pid.toString(16)}-${(counter++).toString(16)}`;
    return store(req, res, path.join(uploads, name), 'wx', `/uploads/${name}`);
  }
  reply(res, 405, { Allow: 'GET, HEAD, PUT, POST' });
}

function serve() {
  const server = opt.tlsCert
    ? https.createServer({ requestTimeout: 0, cert: fs.readFileSync(opt.tlsCert), key: fs.readFileSync(opt.tlsKey),
                          minVersion: 'TLSv1.2' }, handle)
    : http.createServer({ requestTimeout: 0 }, handle);
  server.keepAliveTimeout = 300 * 1000;
  server.headersTimeout = 310 * 1000;
  server.maxHeadersCount = 100;
  server.listen({ host: opt.host, port: opt.port, backlog: opt.backlog });
  process.on('SIGTERM', () => process.exit(0));
}

const scheme = opt.tlsCert ? 'https' : 'http';
fs.mkdirSync(uploads, { recursive: true });
if (opt.workers > 1 && cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_RR;  // set before the first fork
  let stopping = false;
  const listening = new Set();
  cluster.on('listening', (w) => {
    listening.add(w.id);
    if (listening.size === opt.workers) {
      for (const id in cluster.workers) cluster.workers[id].send('xferlab:all-listening');
    }
  });
  for (let i = 0; i < opt.workers; i++) cluster.fork();
  cluster.on('exit', (w, code, sig) => {
    if (!stopping) {
      console.error(`node-http: worker ${w.process.pid} exited (${sig || code})`);
      process.exit(1);
    }
  });
  process.on('SIGTERM', () => {
    stopping = true;
    for (const id in cluster.workers) cluster.workers[id].process.kill('SIGTERM');
    setTimeout(() => process.exit(0), 2000).unref();
    cluster.disconnect(() => process.exit(0));
  });
  console.error(`node-http ${process.version}: ${opt.workers} workers (cluster, round-robin) on ` +
                `${opt.host}:${opt.port} (${scheme}), home ${opt.home}`);
} else {
  serve();
  if (cluster.isPrimary) {
    console.error(`node-http ${process.version} on ${opt.host}:${opt.port} (${scheme}), home ${opt.home}`);
  }
}
