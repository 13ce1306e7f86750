package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
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
	// member (ties: the smallest id) gives the title. The signatures
	// table has a row per signature, far fewer than bundles.
	recent := map[sigKey]bool{}
	for _, sum := range v.Recent {
		recent[sigKey{sum.SigVersion, sum.Fine}] = true
	}
	var later []sigKey
	rows, err := s.db.QueryContext(ctx, `SELECT s.sig_version, s.fine, s.first, s.last, s.total, s.evidence, l.title, l.coarse, l.sig_class
		FROM signatures s JOIN bundles l ON l.id = s.last_id`)
	if err != nil {
		return v, err
	}
	err = scanSigStats(rows, func(st index.SigStats) {
		switch k := (sigKey{st.Version, st.Fine}); {
		case !recent[k]:
		case st.Last.After(now):
			later = append(later, k)
		default:
			v.Signatures = append(v.Signatures, st)
		}
	})
	if err != nil {
		return v, err
	}
	for _, k := range later {
		rows, err := s.db.QueryContext(ctx, s.d.rebind(`
		WITH g AS (SELECT sig_version, fine, min(time) AS first, max(time) AS last, count(*) AS total, max(evidence) AS evidence
		      FROM bundles WHERE sig_version = ? AND fine = ? AND time <= ? GROUP BY sig_version, fine)
		SELECT g.sig_version, g.fine, g.first, g.last, g.total, g.evidence, l.title, l.coarse, l.sig_class
		FROM g JOIN bundles l ON l.id = (SELECT x.id FROM bundles x
		      WHERE x.sig_version = g.sig_version AND x.fine = g.fine AND x.time = g.last ORDER BY x.id LIMIT 1)`),
			k.version, k.fine, now.UnixNano())
		if err != nil {
			return v, err
		}
		if err := scanSigStats(rows, func(st index.SigStats) { v.Signatures = append(v.Signatures, st) }); err != nil {
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

// scanSigStats hands each row of a signatures query to f, and closes rows.
func scanSigStats(rows *sql.Rows, f func(index.SigStats)) error {
	defer rows.Close()
	for rows.Next() {
		var st index.SigStats
		var first, last int64
		var evidence int
		if err := rows.Scan(&st.Version, &st.Fine, &first, &last, &st.Total, &evidence, &st.Title, &st.Coarse, &st.SigClass); err != nil {
			return err
		}
		st.First, st.Last, st.Evidence = time.Unix(0, first).UTC(), time.Unix(0, last).UTC(), evidence != 0
		f(st)
	}
	return rows.Err()
}
