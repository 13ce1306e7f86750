// Package sqlstore is the fleet index in SQL: an embedded SQLite file by
// default (modernc.org/sqlite, pure Go, so kcrash stays CGO_ENABLED=0).
// Queries go through database/sql and a dialect, so that a PostgreSQL
// backend is a dialect and a migration file, not another store.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/kcrash/kcrash/fleet/index"
)

//go:embed migrations/*.sql
var migrations embed.FS

// dialect is what differs between SQL backends.
type dialect struct {
	name   string // the migrations' suffix
	driver string
	// placeholder n (1-based): "?" for SQLite, "$n" for PostgreSQL.
	placeholder func(n int) string
}

var sqlite = dialect{name: "sqlite", driver: "sqlite", placeholder: func(int) string { return "?" }}

// rebind turns a query written with "?" into the dialect's placeholders.
func (d dialect) rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString(d.placeholder(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Store is an index.Store over database/sql.
type Store struct {
	db *sql.DB
	d  dialect
}

var _ index.Store = (*Store)(nil)

// Open opens (creating when missing) the index named by dsn: a file path,
// or "sqlite:PATH".
func Open(ctx context.Context, dsn string) (*Store, error) {
	path := strings.TrimPrefix(dsn, "sqlite:")
	if strings.Contains(dsn, "://") {
		return nil, fmt.Errorf("index %q: only a SQLite file is supported (PostgreSQL comes later)", dsn)
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("index %q: want a file path without '?' or '#'", dsn)
	}
	// WAL lets `kcrash buckets` read while another run writes; NORMAL
	// synchronous is safe with WAL (a crash loses at most the last
	// commit, which the next run reads again from its bundles).
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open(sqlite.driver, "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	// One connection: SQLite has one writer, and the store is used by one
	// process at a time; it also keeps the pragmas on the connection used.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, d: sqlite}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("index %s: %v", path, err)
	}
	return s, nil
}

// migrate applies the embedded migrations not yet applied, in one
// transaction, recording each in schema_migrations.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied[v] = true
	}
	rows.Close()
	files, err := migrations.ReadDir("migrations")
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f.Name(), "_"+s.d.name+".sql") {
			names = append(names, f.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		v, err := strconv.Atoi(name[:4])
		if err != nil {
			return fmt.Errorf("migration %s: no version", name)
		}
		if applied[v] {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("migration %s: %v", name, err)
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`), v, name); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Sources implements index.Store.
func (s *Store) Sources(ctx context.Context) (map[string]index.Stamp, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT path, size, mtime FROM sources`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]index.Stamp{}
	for rows.Next() {
		var p string
		var st index.Stamp
		if err := rows.Scan(&p, &st.Size, &st.MTime); err != nil {
			return nil, err
		}
		out[p] = st
	}
	return out, rows.Err()
}

// Put implements index.Store.
func (s *Store) Put(ctx context.Context, sums []index.Summary, read []index.Source) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, s.d.rebind(`INSERT INTO bundles
		(id, path, time, host, job, rank, sig_version, fine, coarse, title, sig_class, summary)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET path = excluded.path, time = excluded.time, host = excluded.host,
		job = excluded.job, rank = excluded.rank, sig_version = excluded.sig_version, fine = excluded.fine,
		coarse = excluded.coarse, title = excluded.title, sig_class = excluded.sig_class, summary = excluded.summary`))
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, sum := range sums {
		j, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		if _, err := ins.ExecContext(ctx, sum.ID, sum.Path, sum.Time.UnixNano(), sum.Host, sum.Job, sum.Rank,
			sum.SigVersion, sum.Fine, sum.Coarse, sum.Title, sum.SigClass, string(j)); err != nil {
			return fmt.Errorf("bundle %s: %v", sum.ID, err)
		}
	}
	src, err := tx.PrepareContext(ctx, s.d.rebind(`INSERT INTO sources (path, size, mtime) VALUES (?, ?, ?)
		ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime`))
	if err != nil {
		return err
	}
	defer src.Close()
	for _, r := range read {
		if _, err := src.ExecContext(ctx, r.Path, r.Stamp.Size, r.Stamp.MTime); err != nil {
			return fmt.Errorf("source %s: %v", r.Path, err)
		}
	}
	return tx.Commit()
}

// Summaries implements index.Store.
func (s *Store) Summaries(ctx context.Context, since time.Time) ([]index.Summary, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT summary FROM bundles WHERE time >= ? ORDER BY time, id`), since.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []index.Summary
	for rows.Next() {
		var j string
		if err := rows.Scan(&j); err != nil {
			return nil, err
		}
		var sum index.Summary
		if err := json.Unmarshal([]byte(j), &sum); err != nil {
			return nil, fmt.Errorf("a damaged summary in the index: %v", err)
		}
		out = append(out, sum)
	}
	return out, rows.Err()
}

// Count implements index.Store.
func (s *Store) Count(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM bundles`).Scan(&n)
	return n, err
}

// Close implements index.Store.
func (s *Store) Close() error { return s.db.Close() }
