package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/index/storetest"
)

func TestContractSQLite(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	storetest.Run(t, func(t *testing.T, name string) index.Store {
		mu.Lock()
		defer mu.Unlock()
		s, err := Open(context.Background(), filepath.Join(dir, name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A second open applies no migration twice; a file that is not SQLite and a
// server DSN are refused with the reason.
func TestOpenErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "i.db")
	for range 2 {
		s, err := Open(context.Background(), "sqlite:"+p)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("migrations %d %v", n, err)
		}
		s.Close()
	}
	junk := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("not sqlite ", 100)), 0o644)
	if _, err := Open(context.Background(), junk); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk file: %v", err)
	}
	if _, err := Open(context.Background(), "postgres://x/y"); err == nil || !strings.Contains(err.Error(), "PostgreSQL comes later") {
		t.Errorf("postgres: %v", err)
	}
}

func TestRebind(t *testing.T) {
	pg := dialect{placeholder: func(n int) string { return "$" + string(rune('0'+n)) }}
	if got := pg.rebind("a = ? AND b = ?"); got != "a = $1 AND b = $2" {
		t.Errorf("%q", got)
	}
}
