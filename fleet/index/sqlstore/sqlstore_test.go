package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/index/sqlstore/pgtest"
	"github.com/kcrash/kcrash/fleet/index/storetest"
	"github.com/kcrash/kcrash/internal/testenv"
)

func TestContractSQLite(t *testing.T) {
	dir := t.TempDir()
	storetest.Run(t, func(t *testing.T, name string) index.Store {
		s, err := Open(context.Background(), filepath.Join(dir, name+".db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The same contract on a real PostgreSQL server (scripts/pg-test-server.sh),
// each store name a schema of its own.
func TestContractPostgres(t *testing.T) {
	testenv.PostgresDSN(t, "the PostgreSQL index's contract")
	var mu sync.Mutex
	dsns := map[string]string{}
	storetest.Run(t, func(t *testing.T, name string) index.Store {
		mu.Lock()
		defer mu.Unlock() // also when Schema fails the test
		dsn, ok := dsns[name]
		if !ok {
			dsn = pgtest.Schema(t, "the PostgreSQL index's contract")
			dsns[name] = dsn
		}
		s, err := Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A second open applies no migration twice; a file that is not SQLite and a
// DSN of another kind are refused with the reason.
func TestOpenErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "i.db")
	for range 2 {
		s, err := Open(context.Background(), "sqlite:"+p)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != 3 {
			t.Fatalf("migrations %d %v", n, err)
		}
		s.Close()
	}
	junk := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("not sqlite ", 100)), 0o644)
	if _, err := Open(context.Background(), junk); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk file: %v", err)
	}
	if _, err := Open(context.Background(), "mysql://x/y"); err == nil || !strings.Contains(err.Error(), "postgres:// URL") {
		t.Errorf("mysql: %v", err)
	}
	// A server that does not answer is named without its password.
	if _, err := Open(context.Background(), "postgres://kcrash:secret@127.0.0.1:1/kcrash?connect_timeout=5"); err == nil ||
		strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("no server: %v", err)
	}
}

func TestRebind(t *testing.T) {
	if got := postgres.rebind("a = ? AND b = ? AND c = ?"); got != "a = $1 AND b = $2 AND c = $3" {
		t.Errorf("%q", got)
	}
}

// An index written before migration 0002 (no evidence column, no GPU names)
// answers View like ViewOf after it: the migration fills both from the
// stored summaries.
func TestMigrationFillsView(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testMigrationFillsView(t, filepath.Join(t.TempDir(), "old.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		testMigrationFillsView(t, pgtest.Schema(t, "the PostgreSQL migrations"))
	})
}

func testMigrationFillsView(t *testing.T, dsn string) {
	ctx := context.Background()
	old, err := open(ctx, dsn, migrations, 1)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var all []index.Summary
	for i := range 30 {
		host, bus := fmt.Sprintf("n%d", i%2), fmt.Sprintf("0000:%02x:00.0", i%3)
		s := index.Summary{ID: fmt.Sprintf("b%02d", i), Path: "/p", Time: t0.Add(time.Duration(i) * time.Hour), Host: host,
			SigVersion: 1, Fine: fmt.Sprintf("f%d", i%4), Coarse: "c", Title: fmt.Sprint("t", i), Verdict: []string{"gpu_page_fault", "unknown", ""}[i%3],
			Stack: map[string]string{"torch": "2.9"}}
		if i%4 == 3 {
			s.Verdict = "unknown" // f3: no evidence in any member
		}
		if (i/2)%2 == 0 {
			s.GPUs = []index.GPU{{ID: fmt.Sprintf("GPU-%d-%d", i%2, i%3), BusID: bus}}
		} else {
			s.GPUs = []index.GPU{{ID: host + "/" + bus, BusID: bus}}
		}
		if i == 7 {
			s.GPUs = nil // "gpus": null in the stored JSON
		}
		j, _ := json.Marshal(s)
		if _, err := old.db.ExecContext(ctx, old.d.rebind(`INSERT INTO bundles (id, path, time, host, job, rank, sig_version, fine, coarse, title, sig_class, summary)
			VALUES (?, ?, ?, ?, '', '', ?, ?, ?, ?, '', ?)`), s.ID, s.Path, s.Time.UnixNano(), s.Host, s.SigVersion, s.Fine, s.Coarse, s.Title, string(j)); err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	old.Close()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now, from := t0.Add(25*time.Hour), t0.Add(10*time.Hour)
	got, err := s.View(ctx, now, from)
	if err != nil {
		t.Fatal(err)
	}
	want := index.ViewOf(all, now, from)
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("after the migration:\n got %s\nwant %s", gj, wj)
	}
	evidence := 0
	for _, sig := range want.Signatures {
		if sig.Evidence {
			evidence++
		}
	}
	if len(want.Aliases) == 0 || evidence == 0 || evidence == len(want.Signatures) {
		t.Fatalf("the fleet does not exercise aliases and evidence: %s", wj)
	}
}
