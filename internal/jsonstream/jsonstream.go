// Package jsonstream walks a JSON document token by token within bounds:
// the readers of a bundle decode one value at a time, each at most a set
// size, so that what a file holds never decides how much memory they take.
package jsonstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// readChunk bounds what one read brings in ahead of the value decoded.
const readChunk = 64 << 10

// What stops a stream: one value too large, or the file.
var (
	ErrValueTooLarge = errors.New("a value larger than the reader takes")
	ErrFileTooLarge  = errors.New("larger than the reader takes")
)

// budget is the reader under a stream's decoder: it refuses to bring in
// more than valueMax for one value, or fileMax for the whole file, so that
// the decoder's buffer stays bounded whatever the file holds.
type budget struct {
	r           io.Reader
	left, total int64
}

func (b *budget) Read(p []byte) (int, error) {
	if b.total <= 0 {
		return 0, ErrFileTooLarge
	}
	if b.left <= 0 {
		return 0, ErrValueTooLarge
	}
	p = p[:min(int64(len(p)), readChunk, b.left, b.total)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	b.total -= int64(n)
	return n, err
}

// Stream walks a JSON document token by token, decoding only the values
// asked for, each within valueMax.
type Stream struct {
	b        *budget
	dec      *json.Decoder
	valueMax int64
}

// New walks r, refusing any one value (or string) larger than valueMax
// (give or take one read ahead, readChunk) and anything past fileMax.
func New(r io.Reader, valueMax, fileMax int64) *Stream {
	b := &budget{r: r, total: fileMax}
	return &Stream{b: b, dec: json.NewDecoder(b), valueMax: valueMax}
}

func (s *Stream) Token() (json.Token, error) {
	s.b.left = s.valueMax
	return s.dec.Token()
}

func (s *Stream) Decode(v any) error {
	s.b.left = s.valueMax
	return s.dec.Decode(v)
}

// Object walks an object, calling f with each key; f consumes its value
// (Decode, Array, Object or Skip). A null is an empty object.
func (s *Stream) Object(f func(key string) error) error {
	t, err := s.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("want an object, have %v", t)
	}
	return s.ObjectBody(f)
}

// ObjectBody is Object after its opening brace has been read (Token).
func (s *Stream) ObjectBody(f func(key string) error) error {
	for s.More() {
		t, err := s.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if err := f(k); err != nil {
			return err
		}
	}
	_, err := s.Token()
	return err
}

// Array walks an array, calling f for each element (which f consumes). A
// null is an empty array.
func (s *Stream) Array(f func() error) error {
	t, err := s.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("want an array, have %v", t)
	}
	for s.More() {
		if err := f(); err != nil {
			return err
		}
	}
	_, err = s.Token()
	return err
}

// More reports whether the array or object being walked has another element.
func (s *Stream) More() bool {
	s.b.left = s.valueMax
	return s.dec.More()
}

// Skip consumes one value, however large, token by token.
func (s *Stream) Skip() error {
	depth := 0
	for {
		t, err := s.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}
