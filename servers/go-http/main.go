// go-http: the Go net/http server under test of xferlab's HTTP upload lab (seed 002).
// Standard library only. See README.md for the interface.
//
//	PUT  /uploads/<name>  body -> HOME/uploads/<name>, 201 (400 for a name with '/' or '..')
//	POST /uploads/        body -> HOME/uploads/p-<16 hex>, a new file, 201 + Location
//	GET  /<path>          the file HOME/<path> (http.FileServer: sendfile on Linux)
//
// A body over -max-body bytes is answered 413 and nothing is kept. With -tls-cert and
// -tls-key the listener speaks HTTPS (crypto/tls) instead of HTTP.
package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

var (
	listen    = flag.String("listen", "127.0.0.1:8080", "address:port to listen on")
	home      = flag.String("home", ".", "document root; uploads go to HOME/uploads")
	maxBody   = flag.Int64("max-body", 1<<30, "largest upload body, bytes (413 above)")
	keepAlive = flag.Bool("keepalive", true, "false: close every connection after one response")
	version   = flag.Bool("version", false, "print the Go version and exit")
	tlsCert   = flag.String("tls-cert", "", "PEM certificate chain: serve HTTPS (TLS 1.2/1.3) instead of HTTP")
	tlsKey    = flag.String("tls-key", "", "PEM private key of -tls-cert (both or neither)")
)

var (
	uploads string
	files   http.Handler
	next    atomic.Uint64
)

// store copies the request body into a new file at path (created with O_EXCL when
// excl), removing it on any error. It returns the HTTP status to send.
func store(w http.ResponseWriter, r *http.Request, path string, excl bool) int {
	if r.ContentLength > *maxBody {
		return http.StatusRequestEntityTooLarge
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if excl {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return http.StatusConflict
		}
		return http.StatusInternalServerError
	}
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, *maxBody))
	cerr := f.Close()
	if err != nil || cerr != nil {
		os.Remove(path)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge
		}
		return http.StatusBadRequest
	}
	return http.StatusCreated
}

func reply(w http.ResponseWriter, status int, location string) {
	if location != "" {
		w.Header().Set("Location", location)
	}
	if status == http.StatusRequestEntityTooLarge {
		w.Header().Set("Connection", "close") // the rest of the body is not read
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "%d %s\n", status, http.StatusText(status))
}

func handle(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		files.ServeHTTP(w, r)
	case http.MethodPut:
		if !strings.HasPrefix(p, "/uploads/") {
			reply(w, http.StatusForbidden, "")
			return
		}
		name := p[len("/uploads/"):]
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			reply(w, http.StatusBadRequest, "")
			return
		}
		reply(w, store(w, r, filepath.Join(uploads, name), false), "/uploads/"+name)
	case http.MethodPost:
		if p != "/uploads/" && p != "/uploads" {
			reply(w, http.StatusForbidden, "")
			return
		}
		status := http.StatusConflict
		var name string
		for i := 0; i < 8 && status == http.StatusConflict; i++ {
			name = fmt.Sprintf("p-%016x", next.Add(1))
			status = store(w, r, filepath.Join(uploads, name), true)
		}
		reply(w, status, "/uploads/"+name)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, POST")
		reply(w, http.StatusMethodNotAllowed, "")
	}
}

func main() {
	flag.Parse()
	if *version {
		fmt.Println(strings.TrimPrefix(goVersion(), "go"))
		return
	}
	uploads = filepath.Join(*home, "uploads")
	if err := os.MkdirAll(uploads, 0o755); err != nil {
		log.Fatalf("go-http: %v", err)
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err == nil {
		next.Store(binary.LittleEndian.Uint64(seed[:]) >> 8)
	}
	files = http.FileServer(http.Dir(*home))
	srv := &http.Server{Handler: http.HandlerFunc(handle), ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout: 300 * time.Second, ErrorLog: log.New(os.Stderr, "go-http: ", 0)}
	srv.SetKeepAlivesEnabled(*keepAlive)
	if (*tlsCert == "") != (*tlsKey == "") {
		log.Fatalf("go-http: -tls-cert and -tls-key go together (got cert %q, key %q)", *tlsCert, *tlsKey)
	}
	scheme := "http"
	if *tlsCert != "" {
		// crypto/tls with Go's defaults (TLS 1.2 minimum, its cipher order); HTTP/1.1 only,
		// as the plain listener: no h2 in ALPN, so both modes measure the same protocol.
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			log.Fatalf("go-http: loading -tls-cert %s / -tls-key %s: %v", *tlsCert, *tlsKey, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"}}
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		scheme = "https"
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("go-http: %v", err)
	}
	log.Printf("go-http %s listening on %s (%s), home %s, max body %d, keepalive %v", goVersion(), *listen, scheme,
		*home, *maxBody, *keepAlive)
	if scheme == "https" {
		log.Fatal(srv.ServeTLS(ln, "", ""))
	}
	log.Fatal(srv.Serve(ln))
}
