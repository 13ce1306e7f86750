package redact

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Prints are a Redactor's secrets in a form that may lie on disk beside the
// evidence until a later kcrash redacts it (a killed kcrash's stage), without
// the secrets themselves: each value's length, a 16-bit rolling fingerprint
// that finds the few places it may be, and a salted SHA-256 that confirms
// one. The names of secret-looking variables are kept as they are: a name
// is no secret.
type Prints struct {
	Names  []string     `json:"names,omitempty"`
	Salt   string       `json:"salt,omitempty"` // hex
	Values []ValuePrint `json:"values,omitempty"`
}

// ValuePrint is one secret value's print.
type ValuePrint struct {
	Len  int    `json:"len"`
	Roll uint16 `json:"roll"`
	Sum  string `json:"sum"` // hex SHA-256 of the salt then the value
}

// rollBase is the rolling hash's multiplier (FNV's 64-bit prime).
const rollBase = 1099511628211

// printGroup is the prints of one length, by fingerprint.
type printGroup struct {
	n      int
	pow    uint64 // rollBase^(n-1)
	salt   []byte
	byRoll map[uint16][][sha256.Size]byte
}

// Prints returns the prints of r's secrets under a fresh salt.
func (r *Redactor) Prints() Prints {
	salt := make([]byte, 16)
	rand.Read(salt)
	p := Prints{Salt: hex.EncodeToString(salt)}
	for _, n := range r.names {
		p.Names = append(p.Names, strings.TrimSuffix(string(n), "="))
	}
	for _, v := range r.values {
		if len(v) > MaxSecret {
			continue
		}
		sum := salted(salt, v)
		p.Values = append(p.Values, ValuePrint{Len: len(v), Roll: roll(v), Sum: hex.EncodeToString(sum[:])})
	}
	return p
}

// AddPrints makes r mask what p's secrets were, wherever they appear, and
// the values of p's names where they stand as NAME=value.
func (r *Redactor) AddPrints(p Prints) {
	for _, n := range p.Names {
		if IsSecretName(n) && !bytes.ContainsAny([]byte(n), "= \n") {
			r.names = append(r.names, []byte(n+"="))
		}
	}
	salt, err := hex.DecodeString(p.Salt)
	if err != nil {
		return
	}
	for _, v := range p.Values {
		sum, err := hex.DecodeString(v.Sum)
		if err != nil || len(sum) != sha256.Size || v.Len < minValue || v.Len > MaxSecret {
			continue
		}
		var g *printGroup
		for _, x := range r.prints {
			if x.n == v.Len && bytes.Equal(x.salt, salt) {
				g = x
			}
		}
		if g == nil {
			g = &printGroup{n: v.Len, pow: power(v.Len - 1), salt: salt, byRoll: map[uint16][][sha256.Size]byte{}}
			r.prints = append(r.prints, g)
		}
		g.byRoll[v.Roll] = append(g.byRoll[v.Roll], [sha256.Size]byte(sum))
	}
}

// findPrints adds to spans every place in b holding a printed secret.
func (r *Redactor) findPrints(b []byte, spans []span) []span {
	for _, g := range r.prints {
		if len(b) < g.n {
			continue
		}
		h := rollHash(b[:g.n])
		for i := 0; ; i++ {
			if sums, ok := g.byRoll[uint16(h>>48)]; ok {
				s := salted(g.salt, b[i:i+g.n])
				for _, want := range sums {
					if s == want {
						spans = append(spans, span{start: i, end: i + g.n})
						break
					}
				}
			}
			if i+g.n >= len(b) {
				break
			}
			h = (h-uint64(b[i])*g.pow)*rollBase + uint64(b[i+g.n])
		}
	}
	return spans
}

func salted(salt, v []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(salt)
	h.Write(v)
	return [sha256.Size]byte(h.Sum(nil))
}

func rollHash(b []byte) uint64 {
	var h uint64
	for _, c := range b {
		h = h*rollBase + uint64(c)
	}
	return h
}

func roll(v []byte) uint16 { return uint16(rollHash(v) >> 48) }

func power(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= rollBase
	}
	return p
}
