package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// dialect is what differs between SQL backends: the queries are the same.
type dialect struct {
	name   string // the migrations' suffix
	driver string
	// placeholder n (1-based): "?" for SQLite, "$n" for PostgreSQL.
	placeholder func(n int) string
	// lockMigrations, run first in the migrations' transaction, keeps two
	// processes opening a new index at once from both creating its tables.
	lockMigrations string
	// retry: the transaction lost to a concurrent one and may run again.
	retry func(error) bool
	// forUpdate ends a SELECT of a row the transaction will change.
	forUpdate string
}

var (
	sqlite = dialect{name: "sqlite", driver: "sqlite", placeholder: func(int) string { return "?" },
		// Transactions begin IMMEDIATE (the DSN's _txlock): the write lock is
		// taken, waiting up to the busy timeout, before the first statement.
		retry: func(error) bool { return false }}
	postgres = dialect{name: "postgres", driver: "pgx", placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
		// Any constant shared by every kcrash: "kcrash" in ASCII.
		lockMigrations: `SELECT pg_advisory_xact_lock(107991971656104)`,
		forUpdate:      ` FOR UPDATE`,
		retry: func(err error) bool {
			// serialization_failure, deadlock_detected: Put takes its row
			// locks in one order, so these are rare, but a writer that
			// loses one should not lose its bundles. unique_violation: a
			// signature counted again from bundles that another writer
			// created meanwhile; the next try locks and counts its row.
			var pe *pgconn.PgError
			return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "23505")
		}}
)

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

// IsServer reports whether dsn names a database server (a postgres:// or
// postgresql:// URL) rather than a SQLite file.
func IsServer(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// connect opens the database named by dsn and says which dialect it speaks;
// name is how errors refer to it (a server DSN without its password).
func connect(dsn string) (db *sql.DB, d dialect, name string, err error) {
	if IsServer(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, d, "", fmt.Errorf("index: not a PostgreSQL URL: %v", err)
		}
		name = u.Redacted()
		db, err = sql.Open(postgres.driver, dsn)
		if err != nil {
			return nil, d, "", fmt.Errorf("index %s: %v", name, err)
		}
		// A few connections: the store is one process's, one call at a time;
		// other processes (other nodes) have their own.
		db.SetMaxOpenConns(4)
		return db, postgres, name, nil
	}
	if strings.Contains(dsn, "://") {
		return nil, d, "", fmt.Errorf("index %q: want a SQLite file path or a postgres:// URL", dsn)
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, d, "", fmt.Errorf("index %q: want a file path without '?' or '#'", dsn)
	}
	// WAL lets `kcrash buckets` read while another run writes; NORMAL
	// synchronous is safe with WAL (a crash loses at most the last
	// commit, which the next run reads again from its bundles).
	q := url.Values{}
	// Reads through a memory map and a 64 MiB page cache: a report reads
	// its window's rows in time order, scattered over the file.
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)",
		"mmap_size(1073741824)", "cache_size(-65536)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err = sql.Open(sqlite.driver, "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, d, "", err
	}
	// One connection: SQLite has one writer, and the store is used by one
	// process at a time; it also keeps the pragmas on the connection used.
	db.SetMaxOpenConns(1)
	return db, sqlite, path, nil
}

// inTx runs f in a transaction, again (up to 5 times) when the dialect says
// it lost to a concurrent writer.
func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tx(ctx, f)
		if err == nil || attempt == 5 || !s.d.retry(err) || ctx.Err() != nil {
			return err
		}
	}
}

func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}
