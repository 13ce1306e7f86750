package suggest

import "testing"

func TestNearest(t *testing.T) {
	opts := []string{"out", "ring", "collector-timeout", "collectors", "profile", "hang-timeout"}
	for _, c := range []struct{ word, want string }{
		{"outt", "out"},
		{"profil", "profile"},
		{"colectors", "collectors"},
		{"hang-timout", "hang-timeout"},
		{"rign", "ring"},
		{"zzzzzz", ""}, // nothing close
		{"", ""},
		{"x", ""},
	} {
		if got := Nearest(c.word, opts); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}
