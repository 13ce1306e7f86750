package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// A secret known only by its print is masked wherever it appears, across a
// stream's cuts too, and the print holds nothing of the secret.
func TestPrintsRedactWithoutTheSecret(t *testing.T) {
	const secret = "s3cr3t-value-of-the-run-7781"
	p := New([]string{"MY_API_TOKEN=" + secret, "PATH=/usr/bin"}).Prints()
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), secret) || strings.Contains(string(b), secret[:10]) {
		t.Fatalf("the prints hold the secret: %s", b)
	}
	var back Prints
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	r := New(nil)
	r.AddPrints(back)
	in := "start " + secret + " mid\nMY_API_TOKEN=short end " + secret
	got := string(r.Bytes([]byte(in)))
	if strings.Contains(got, secret) || strings.Contains(got, "=short") {
		t.Fatalf("not masked: %q", got)
	}
	if want := "start " + Mask + " mid\nMY_API_TOKEN=" + Mask + " end " + Mask; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// a stream cut inside the secret
	data := []byte(strings.Repeat("x", 100) + secret + strings.Repeat("y", 100))
	cut := 100 + len(secret)/2
	out1, used := r.Chunk(data[:cut], false)
	out2, _ := r.Chunk(append(append([]byte{}, data[used:cut]...), data[cut:]...), true)
	if s := string(out1) + string(out2); strings.Contains(s, secret[:8]) || !strings.Contains(s, Mask) {
		t.Fatalf("cut secret not masked: %q", s)
	}
	// another salt's print of the same value matches nothing it should not
	other := New(nil)
	other.AddPrints(New([]string{"MY_API_TOKEN=another-value-entirely-00"}).Prints())
	if got := string(other.Bytes([]byte(in))); strings.Contains(got, Mask+" mid") {
		t.Fatalf("masked a secret it was never given: %q", got)
	}
}
