// Package pgtest gives a test its own empty corner of the PostgreSQL test
// server (testenv.PostgresDSN): a schema of its own, dropped when the test
// ends, so that tests sharing the server see nothing of each other.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/kcrash/kcrash/internal/testenv"
)

// Schema creates a fresh schema on the test server and returns a DSN whose
// connections use it (search_path); it skips (fails under CI) without a
// server.
func Schema(t testing.TB, what string) string {
	t.Helper()
	dsn := testenv.PostgresDSN(t, what)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s: %v", testenv.PostgresDSNEnv, err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "kcrash_test_" + hex.EncodeToString(b)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		db.Close()
		t.Fatalf("create schema on the test server (%s): %v", u.Redacted(), err)
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA `+name+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
