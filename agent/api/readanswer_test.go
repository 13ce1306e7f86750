package api

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// readAnswer reads a body of announced length into a buffer of exactly
// that length: it hands out what reading the body to its end does, the
// same bytes and an error where that one has one.
func TestReadAnswerAsReadToEnd(t *testing.T) {
	for _, c := range []struct{ name, raw string }{
		{"announced", "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"a\":\"b c\"}"},
		{"announced, more sent", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}{}{}"},
		{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"boot_id\":"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n3\r\n\"b\"\r\n1\r\n}\r\n0\r\n\r\n"},
		{"empty", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	} {
		read := func() *http.Response {
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(c.raw)), nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return resp
		}
		got, gerr := readAnswer(read())
		var want bytes.Buffer
		_, werr := want.ReadFrom(io.LimitReader(read().Body, MaxResponseBytes+1))
		if !bytes.Equal(got, want.Bytes()) || (gerr == nil) != (werr == nil) {
			t.Errorf("%s: %q, %v; read to its end: %q, %v", c.name, got, gerr, want.Bytes(), werr)
		}
		if c.name == "cut short" && gerr == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
