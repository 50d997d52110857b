// netty: the Netty (4.1, Debian's libnetty-java) server under test of xferlab's HTTP
// upload lab (seed 002). NIO transport; bodies are streamed to the file as they arrive.
//
//   PUT  /uploads/<name>  body -> HOME/uploads/<name>, 201 (400 for a name with '/' or '..')
//   POST /uploads/        body -> HOME/uploads/p-<16 hex>, a new file, 201 + Location
//   GET  /<path>          the file HOME/<path> (DefaultFileRegion: FileChannel.transferTo, sendfile)
// A body over --max-body bytes: 413 + Connection: close, nothing kept. With --tls-cert and
// --tls-key (PEM, the key PKCS#8; both or neither) the listener speaks HTTPS instead: an
// SslHandler (the JDK's TLS 1.2/1.3, HTTP/1.1) first in each pipeline, and GET sends the
// file as a ChunkedFile (read into buffers, encrypted) in place of the DefaultFileRegion.
//
// usage: java -cp ... NettyServer --host H --port P --home DIR [--workers N]
//                                 [--max-body BYTES] [--keepalive 0|1] [--backlog N]
//                                 [--tls-cert PEM --tls-key PEM]
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.stream.ChunkedFile;
import io.netty.handler.stream.ChunkedWriteHandler;
import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.concurrent.atomic.AtomicLong;

public final class NettyServer {
    static Path home;
    static Path uploads;
    static long maxBody = 1L << 30;
    static boolean keepAliveOn = true;
    static SslContext sslCtx;  // null: plain HTTP
    static final AtomicLong NEXT = new AtomicLong(new SecureRandom().nextLong() >>> 8);

    static final class Handler extends SimpleChannelInboundHandler<HttpObject> {
        private FileChannel out;
        private Path file;
        private String location;
        private long got;
        private int status;        // 0 while an upload is being stored
        private boolean keepAlive;
        private boolean skip;      // the rest of this request's content is ignored

        private void respond(ChannelHandlerContext ctx, int code, String loc, boolean close) {
            ByteBuf body = Unpooled.copiedBuffer(code + "\n", StandardCharsets.US_ASCII);
            FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1,
                    HttpResponseStatus.valueOf(code), body);
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, "text/plain; charset=utf-8");
            r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, body.readableBytes());
            if (loc != null) r.headers().set(HttpHeaderNames.LOCATION, loc);
            boolean ka = keepAlive && !close;
            r.headers().set(HttpHeaderNames.CONNECTION, ka ? HttpHeaderValues.KEEP_ALIVE : HttpHeaderValues.CLOSE);
            ChannelFuture f = ctx.writeAndFlush(r);
            if (!ka) f.addListener(ChannelFutureListener.CLOSE);
        }

        private void drop() {
            try {
                if (out != null) out.close();
                if (file != null) Files.deleteIfExists(file);
            } catch (IOException e) {
                // nothing more to undo
            }
            out = null;
            file = null;
        }

        private void get(ChannelHandlerContext ctx, HttpRequest req, String p) throws IOException {
            Path f = home.resolve(p.substring(1)).normalize();
            if (!f.startsWith(home) || !Files.isRegularFile(f)) {
                respond(ctx, Files.exists(f) ? 403 : 404, null, false);
                return;
            }
            RandomAccessFile raf = new RandomAccessFile(f.toFile(), "r");
            long len = raf.length();
            HttpResponse r = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
            r.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/octet-stream");
            r.headers().set(HttpHeaderNames.CONTENT_LENGTH, len);
            r.headers().set(HttpHeaderNames.CONNECTION, keepAlive ? HttpHeaderValues.KEEP_ALIVE : HttpHeaderValues.CLOSE);
            ctx.write(r);
            if (req.method().equals(HttpMethod.HEAD) || len == 0) {
                raf.close();
            } else {
                ctx.write(sslCtx == null ? new DefaultFileRegion(raf.getChannel(), 0, len)
                                         : new ChunkedFile(raf, 0, len, 64 * 1024));
            }
            ChannelFuture last = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
            if (!keepAlive) last.addListener(ChannelFutureListener.CLOSE);
        }

        private void start(ChannelHandlerContext ctx, HttpRequest req) throws IOException {
            keepAlive = keepAliveOn && HttpUtil.isKeepAlive(req);
            status = 0;
            got = 0;
            skip = true;
            String raw = new QueryStringDecoder(req.uri()).rawPath();
            String p = QueryStringDecoder.decodeComponent(raw);
            HttpMethod m = req.method();
            if (p.indexOf('\0') >= 0 || ("/" + p + "/").contains("/../") || !p.startsWith("/")) {
                respond(ctx, 400, null, false);   // any body is skipped: the connection stays
            } else if (m.equals(HttpMethod.GET) || m.equals(HttpMethod.HEAD)) {
                get(ctx, req, p);
            } else if (m.equals(HttpMethod.PUT) || m.equals(HttpMethod.POST)) {
                if (HttpUtil.getContentLength(req, 0L) > maxBody) {
                    respond(ctx, 413, null, true);
                    return;
                }
                String name;
                StandardOpenOption mode;
                if (m.equals(HttpMethod.PUT)) {
                    if (!p.startsWith("/uploads/")) {
                        respond(ctx, 403, null, true);
                        return;
                    }
                    name = p.substring("/uploads/".length());
                    if (name.isEmpty() || name.equals(".") || name.contains("/")) {
                        respond(ctx, 400, null, false);
                        return;
                    }
                    mode = StandardOpenOption.TRUNCATE_EXISTING;
                } else {
                    if (!p.equals("/uploads/") && !p.equals("/uploads")) {
                        respond(ctx, 403, null, true);
                        return;
                    }
                    name = String.format("p-%016x", NEXT.incrementAndGet());
                    mode = StandardOpenOption.CREATE_NEW;
                }
                file = uploads.resolve(name);
                location = "/uploads/" + name;
                out = FileChannel.open(file, StandardOpenOption.WRITE, StandardOpenOption.CREATE, mode);
                skip = false;
            } else {
                respond(ctx, 405, null, true);
            }
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, HttpObject msg) throws Exception {
            if (msg instanceof HttpRequest) {
                HttpRequest req = (HttpRequest) msg;
                if (!req.decoderResult().isSuccess()) {
                    keepAlive = false;
                    respond(ctx, 400, null, true);
                    skip = true;
                    return;
                }
                try {
                    start(ctx, req);
                } catch (IOException e) {
                    drop();
                    skip = true;
                    respond(ctx, e instanceof java.nio.file.FileAlreadyExistsException ? 409 : 500, null, true);
                }
            }
            if (msg instanceof HttpContent && !skip) {
                ByteBuf buf = ((HttpContent) msg).content();
                got += buf.readableBytes();
                if (got > maxBody) {
                    drop();
                    skip = true;
                    respond(ctx, 413, null, true);
                    return;
                }
                try {
                    ByteBuffer[] bufs = buf.nioBuffers();
                    for (ByteBuffer b : bufs) {
                        while (b.hasRemaining()) out.write(b);
                    }
                } catch (IOException e) {
                    drop();
                    skip = true;
                    respond(ctx, 500, null, true);
                    return;
                }
                if (msg instanceof LastHttpContent) {
                    out.close();
                    out = null;
                    file = null;
                    skip = true;
                    respond(ctx, 201, location, false);
                }
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            drop();                      // an upload cut off: nothing kept
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            drop();
            ctx.close();
        }
    }

    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = 8080, workers = 1, backlog = 4096;
        String homeArg = ".", tlsCert = "", tlsKey = "";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--host": host = args[i + 1]; break;
                case "--port": port = Integer.parseInt(args[i + 1]); break;
                case "--home": homeArg = args[i + 1]; break;
                case "--workers": workers = Integer.parseInt(args[i + 1]); break;
                case "--max-body": maxBody = Long.parseLong(args[i + 1]); break;
                case "--keepalive": keepAliveOn = !args[i + 1].equals("0"); break;
                case "--backlog": backlog = Integer.parseInt(args[i + 1]); break;
                case "--tls-cert": tlsCert = args[i + 1]; break;
                case "--tls-key": tlsKey = args[i + 1]; break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (tlsCert.isEmpty() != tlsKey.isEmpty()) {
            throw new IllegalArgumentException("--tls-cert and --tls-key go together (got cert '" + tlsCert
                    + "', key '" + tlsKey + "')");
        }
        if (!tlsCert.isEmpty()) {
            sslCtx = SslContextBuilder.forServer(new File(tlsCert), new File(tlsKey))
                    .protocols("TLSv1.3", "TLSv1.2").build();
        }
        home = Paths.get(homeArg).toAbsolutePath().normalize();
        uploads = home.resolve("uploads");
        Files.createDirectories(uploads);
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup work = new NioEventLoopGroup(workers);
        ServerBootstrap b = new ServerBootstrap()
                .group(boss, work)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, backlog)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        if (sslCtx != null) {
                            ch.pipeline().addLast(sslCtx.newHandler(ch.alloc()), new HttpServerCodec(),
                                                  new ChunkedWriteHandler(), new Handler());
                        } else {
                            ch.pipeline().addLast(new HttpServerCodec(), new Handler());
                        }
                    }
                });
        ChannelFuture f = b.bind(host, port).sync();
        System.err.println("netty " + io.netty.util.Version.identify().values().iterator().next().artifactVersion()
                + " on " + host + ":" + port + (sslCtx != null ? " (https)" : "") + ", " + workers + " event loop(s), home " + home);
        f.channel().closeFuture().sync();
    }
}
