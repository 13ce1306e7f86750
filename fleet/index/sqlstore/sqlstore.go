// Package sqlstore is the fleet index in SQL: an embedded SQLite file by
// default (modernc.org/sqlite, pure Go, so kcrash stays CGO_ENABLED=0), or
// a PostgreSQL server that many nodes write to (pgx, pure Go too). Queries
// go through database/sql and a dialect (placeholders, locking, retries):
// the two backends run the same queries and migrations of the same shape.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kcrash/kcrash/fleet/index"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is an index.Store over database/sql.
type Store struct {
	db *sql.DB
	d  dialect
}

var _ index.Store = (*Store)(nil)

// Open opens (creating when missing) the index named by dsn: a file path or
// "sqlite:PATH" (SQLite), or a postgres:// URL (PostgreSQL; the database
// must exist, its tables are created on first use).
func Open(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, migrations, 0)
}

// open applies the migrations of fsys up to version upTo (0: all).
func open(ctx context.Context, dsn string, fsys fs.FS, upTo int) (*Store, error) {
	db, d, name, err := connect(dsn)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, d: d}
	if err := s.migrate(ctx, fsys, upTo); err != nil {
		db.Close()
		return nil, fmt.Errorf("index %s: %v", name, err)
	}
	return s, nil
}

// migrate applies the embedded migrations not yet applied, in one
// transaction, recording each in schema_migrations.
func (s *Store) migrate(ctx context.Context, fsys fs.FS, upTo int) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.lockMigrations != "" {
			if _, err := tx.ExecContext(ctx, s.d.lockMigrations); err != nil {
				return err
			}
		}
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
		files, err := fs.ReadDir(fsys, "migrations")
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
			if applied[v] || upTo > 0 && v > upTo {
				continue
			}
			body, err := fs.ReadFile(fsys, "migrations/"+name)
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
		return nil
	})
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

// gpuName is one row of gpu_names.
type gpuName struct {
	key, id, bundle string
	time            int64
	pos             int
}

// Put implements index.Store. Many writers may put at once (nodes writing
// to one server): every upsert is atomic, and rows are locked in one order
// (stacks by text, bundles by ID, signatures, GPU names by key, sources by
// path) so that two writers do not deadlock (and a writer that loses a
// deadlock to a reader's lock runs again).
func (s *Store) Put(ctx context.Context, sums []index.Summary, read []index.Source) error {
	sums = slices.Clone(sums)
	slices.SortStableFunc(sums, func(a, b index.Summary) int { return cmp.Compare(a.ID, b.ID) })
	read = slices.Clone(read)
	slices.SortStableFunc(read, func(a, b index.Source) int { return cmp.Compare(a.Path, b.Path) })
	var names []gpuName
	stackOf := make([]string, len(sums))
	gpusOf := make([]string, len(sums))
	stackSet := map[string]bool{}
	for i, sum := range sums {
		st, err := json.Marshal(sum.Stack) // keys sorted: one text per stack
		if err != nil {
			return err
		}
		g, err := json.Marshal(sum.GPUs)
		if err != nil {
			return err
		}
		stackOf[i], gpusOf[i] = string(st), string(g)
		stackSet[string(st)] = true
		for j, g := range sum.GPUs {
			if k, ok := index.AliasKey(sum.Host, g); ok {
				names = append(names, gpuName{key: k, id: g.ID, bundle: sum.ID, time: sum.Time.UnixNano(), pos: j})
			}
		}
	}
	stacks := slices.Sorted(maps.Keys(stackSet))
	slices.SortStableFunc(names, func(a, b gpuName) int { return cmp.Compare(a.key, b.key) })
	return s.inTx(ctx, func(tx *sql.Tx) error {
		stackID := map[string]int64{}
		addStack, err := tx.PrepareContext(ctx, s.d.rebind(`INSERT INTO stacks (stack) VALUES (?) ON CONFLICT (stack) DO NOTHING`))
		if err != nil {
			return err
		}
		defer addStack.Close()
		getStack, err := tx.PrepareContext(ctx, s.d.rebind(`SELECT id FROM stacks WHERE stack = ?`))
		if err != nil {
			return err
		}
		defer getStack.Close()
		for _, st := range stacks {
			if _, err := addStack.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("stack %s: %v", st, err)
			}
			var id int64
			if err := getStack.QueryRowContext(ctx, st).Scan(&id); err != nil {
				return fmt.Errorf("stack %s: %v", st, err)
			}
			stackID[st] = id
		}
		if err := s.putBundles(ctx, tx, sums, gpusOf, stackOf, stackID); err != nil {
			return err
		}
		// A name replaces the key's only when its bundle is later (time,
		// then bundle ID, then position): the latest naming wins whatever
		// order the bundles arrive in.
		name, err := tx.PrepareContext(ctx, s.d.rebind(`INSERT INTO gpu_names (alias_key, gpu_id, time, bundle_id, pos)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (alias_key) DO UPDATE SET gpu_id = excluded.gpu_id, time = excluded.time, bundle_id = excluded.bundle_id, pos = excluded.pos
		WHERE (excluded.time, excluded.bundle_id, excluded.pos) > (gpu_names.time, gpu_names.bundle_id, gpu_names.pos)`))
		if err != nil {
			return err
		}
		defer name.Close()
		for _, n := range names {
			if _, err := name.ExecContext(ctx, n.key, n.id, n.time, n.bundle, n.pos); err != nil {
				return fmt.Errorf("bundle %s: GPU %s: %v", n.bundle, n.id, err)
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
		return nil
	})
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Summaries implements index.Store.
func (s *Store) Summaries(ctx context.Context, since time.Time) ([]index.Summary, error) {
	return s.summaries(ctx, `WHERE time >= ?`, since.UnixNano())
}

// OtherVersions implements index.Store.
func (s *Store) OtherVersions(ctx context.Context, version int) ([]index.Summary, error) {
	return s.summaries(ctx, `WHERE sig_version <> ?`, version)
}

// summaryColumns are a summary's columns, in summaryRows' order.
const summaryColumns = `id, path, time, host, job, rank, sig_version, fine, coarse, title, sig_class, verdict, recomputed, gpus, stack_id, previous`

// summaries returns the summaries of the bundles where holds (a WHERE
// clause), oldest first, ties by ID. A fleet has few stacks and GPU lists
// repeat, so each distinct text is decoded once; every summary gets copies
// of its own.
func (s *Store) summaries(ctx context.Context, where string, args ...any) ([]index.Summary, error) {
	stacks := map[int64]map[string]string{}
	rows, err := s.db.QueryContext(ctx, `SELECT id, stack FROM stacks`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id int64
		var text []byte
		var st map[string]string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return nil, err
		}
		if err := json.Unmarshal(text, &st); err != nil {
			rows.Close()
			return nil, fmt.Errorf("a damaged stack in the index: %v", err)
		}
		stacks[id] = st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.db.QueryContext(ctx, s.d.rebind(`SELECT `+summaryColumns+` FROM bundles `+where+` ORDER BY time, id`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	gpuLists := map[string][]index.GPU{}
	var out []index.Summary
	var gpus, previous string
	var at, stackID int64
	var recomputed int
	for rows.Next() {
		var sum index.Summary
		if err := rows.Scan(&sum.ID, &sum.Path, &at, &sum.Host, &sum.Job, &sum.Rank, &sum.SigVersion, &sum.Fine, &sum.Coarse,
			&sum.Title, &sum.SigClass, &sum.Verdict, &recomputed, &gpus, &stackID, &previous); err != nil {
			return nil, err
		}
		sum.Previous = strings.Fields(previous)
		sum.Time, sum.Recomputed = time.Unix(0, at).UTC(), recomputed != 0
		l, ok := gpuLists[gpus]
		if !ok {
			if err := json.Unmarshal([]byte(gpus), &l); err != nil {
				return nil, fmt.Errorf("bundle %s: damaged GPUs in the index: %v", sum.ID, err)
			}
			gpuLists[gpus] = l
		}
		st, ok := stacks[stackID]
		if !ok {
			return nil, fmt.Errorf("bundle %s: stack %d is not in the index", sum.ID, stackID)
		}
		sum.GPUs, sum.Stack = slices.Clone(l), maps.Clone(st)
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
