// Command s3server is a real S3-compatible server (gofakes3, objects in
// memory) for kcrash's S3 tests, started by .ci/run through
// scripts/s3-test-server.sh. It is a module of its own so that kcrash's
// go.mod does not carry it.
//
// Every request is logged, before it is handled, as one line
//
//	access_key=AKID method=PUT path=/bucket/key
//
// so that a test can see which credentials the AWS SDK's chain picked: the
// line is written before the answer, so a client that got its answer finds
// it in the log. The secret never reaches the server; the access key id is
// the Credential= part of a SigV4 Authorization header (or of a pre-signed
// URL's X-Amz-Credential).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen on `HOST:PORT` (port 0: any free port)")
	addrFile := flag.String("addr-file", "", "write the address it listens on to `FILE` once it accepts connections")
	logFile := flag.String("log", "", "append one line per request to `FILE` (default: stderr)")
	flag.Parse()

	var out io.Writer = os.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		out = f
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	faker := gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := &http.Server{Handler: logAccessKeys(out, faker.Server())}
	if *addrFile != "" {
		// Written to a temporary name and renamed: a reader never sees half an address.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			log.Fatal(err)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	go func() { <-stop; srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// logAccessKeys writes each request's access key id, method and path.
func logAccessKeys(w io.Writer, next http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintf(w, "access_key=%s method=%s path=%s\n", accessKeyID(r), r.Method, r.URL.EscapedPath())
		mu.Unlock()
		next.ServeHTTP(rw, r)
	})
}

// accessKeyID is the key id a SigV4 request was signed with, "-" for an
// anonymous one.
func accessKeyID(r *http.Request) string {
	cred := r.URL.Query().Get("X-Amz-Credential")
	if a := r.Header.Get("Authorization"); a != "" {
		if _, after, ok := strings.Cut(a, "Credential="); ok {
			cred = after
		}
	}
	id, _, _ := strings.Cut(cred, "/")
	if id == "" {
		return "-"
	}
	return id
}
