package sqlstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/kcrash/kcrash/fleet/index"
)

// View implements index.Store: three queries, whatever the index holds
// before from. The window's summaries are decoded; older bundles are only
// aggregated, by the database, over the (sig_version, fine, time,
// evidence) index.
func (s *Store) View(ctx context.Context, now, from time.Time) (index.View, error) {
	v := index.View{Aliases: map[string]string{}}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM bundles`).Scan(&v.Bundles); err != nil {
		return v, err
	}
	var err error
	v.Recent, err = s.summaries(ctx, `WHERE time >= ? AND time <= ?`, from.UnixNano(), now.UnixNano())
	if err != nil {
		return v, err
	}
	if len(v.Recent) == 0 {
		return v, nil
	}
	// Signatures with a member in [from, now]: from their signatures row
	// when no member is later than now (a report as of now, the usual
	// case), else aggregated over their members up to now. The latest
	// member (ties: the smallest id) gives the title.
	for _, q := range []string{`
		WITH recent AS (SELECT DISTINCT sig_version, fine FROM bundles WHERE time >= ? AND time <= ?)
		SELECT s.sig_version, s.fine, s.first, s.last, s.total, s.evidence, l.title, l.coarse, l.sig_class
		FROM recent r JOIN signatures s ON s.sig_version = r.sig_version AND s.fine = r.fine
		JOIN bundles l ON l.id = s.last_id
		WHERE s.last <= ?`, `
		WITH recent AS (SELECT DISTINCT r.sig_version, r.fine FROM bundles r
		      JOIN signatures s ON s.sig_version = r.sig_version AND s.fine = r.fine
		      WHERE r.time >= ? AND r.time <= ? AND s.last > ?),
		g AS (SELECT b.sig_version, b.fine, min(b.time) AS first, max(b.time) AS last, count(*) AS total, max(b.evidence) AS evidence
		      FROM bundles b JOIN recent r ON b.sig_version = r.sig_version AND b.fine = r.fine
		      WHERE b.time <= ?
		      GROUP BY b.sig_version, b.fine)
		SELECT g.sig_version, g.fine, g.first, g.last, g.total, g.evidence, l.title, l.coarse, l.sig_class
		FROM g JOIN bundles l ON l.id = (SELECT x.id FROM bundles x
		      WHERE x.sig_version = g.sig_version AND x.fine = g.fine AND x.time = g.last ORDER BY x.id LIMIT 1)`} {
		args := []any{from.UnixNano(), now.UnixNano(), now.UnixNano(), now.UnixNano()}
		if err := s.signatures(ctx, &v, q, args[:strings.Count(q, "?")]...); err != nil {
			return v, err
		}
	}
	slices.SortFunc(v.Signatures, func(a, b index.SigStats) int {
		return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.Fine, b.Fine))
	})
	// GPU names: one row per host/bus id ever named, a few per GPU of the
	// fleet; those the window's GPUs use are kept.
	used := map[string]bool{}
	for _, sum := range v.Recent {
		for _, g := range sum.GPUs {
			used[g.ID] = true
		}
	}
	names, err := s.db.QueryContext(ctx, `SELECT alias_key, gpu_id FROM gpu_names`)
	if err != nil {
		return v, err
	}
	defer names.Close()
	for names.Next() {
		var k, id string
		if err := names.Scan(&k, &id); err != nil {
			return v, err
		}
		if used[k] {
			v.Aliases[k] = id
		}
	}
	return v, names.Err()
}

// signatures appends the SigStats a query returns.
func (s *Store) signatures(ctx context.Context, v *index.View, q string, args ...any) error {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var st index.SigStats
		var first, last int64
		var evidence int
		if err := rows.Scan(&st.Version, &st.Fine, &first, &last, &st.Total, &evidence, &st.Title, &st.Coarse, &st.SigClass); err != nil {
			return err
		}
		st.First, st.Last, st.Evidence = time.Unix(0, first).UTC(), time.Unix(0, last).UTC(), evidence != 0
		v.Signatures = append(v.Signatures, st)
	}
	return rows.Err()
}
