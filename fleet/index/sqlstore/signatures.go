package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/kcrash/kcrash/fleet/index"
)

// sigKey is a signatures row's key.
type sigKey struct {
	version int
	fine    string
}

// sigDelta is what a batch adds to one signature.
type sigDelta struct {
	first, last int64
	lastID      string // the latest member: by time, ties the smallest id
	total       int
	evidence    int
}

func (d *sigDelta) add(at int64, id string, evidence int) {
	if d.total == 0 || at < d.first {
		d.first = at
	}
	if d.total == 0 || at > d.last || at == d.last && id < d.lastID {
		d.last, d.lastID = at, id
	}
	d.total++
	d.evidence = max(d.evidence, evidence)
}

// putBundles writes the bundles (sums sorted by ID) and keeps signatures
// in step: a new bundle adds to its signature's row (an atomic upsert, so
// that writers on other nodes add theirs too); a bundle put again with the
// same signature, time and evidence changes no row; one that changed has
// its old and new signatures counted again from bundles.
func (s *Store) putBundles(ctx context.Context, tx *sql.Tx, sums []index.Summary, gpusOf, stackOf []string, stackID map[string]int64) error {
	ins, err := tx.PrepareContext(ctx, s.d.rebind(`INSERT INTO bundles
		(id, path, time, host, job, rank, sig_version, fine, coarse, title, sig_class, verdict, evidence, recomputed, gpus, stack_id, previous)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`))
	if err != nil {
		return err
	}
	defer ins.Close()
	old, err := tx.PrepareContext(ctx, s.d.rebind(`SELECT sig_version, fine, time, evidence FROM bundles WHERE id = ?`+s.d.forUpdate))
	if err != nil {
		return err
	}
	defer old.Close()
	upd, err := tx.PrepareContext(ctx, s.d.rebind(`UPDATE bundles SET path = ?, time = ?, host = ?, job = ?, rank = ?,
		sig_version = ?, fine = ?, coarse = ?, title = ?, sig_class = ?, verdict = ?, evidence = ?, recomputed = ?, gpus = ?, stack_id = ?,
		previous = ? WHERE id = ?`))
	if err != nil {
		return err
	}
	defer upd.Close()
	deltas := map[sigKey]*sigDelta{}
	recount := map[sigKey]bool{}
	for i, sum := range sums {
		at, ev := sum.Time.UnixNano(), flag(index.HasEvidence(sum.Verdict))
		k := sigKey{sum.SigVersion, sum.Fine}
		res, err := ins.ExecContext(ctx, sum.ID, sum.Path, at, sum.Host, sum.Job, sum.Rank, sum.SigVersion, sum.Fine, sum.Coarse,
			sum.Title, sum.SigClass, sum.Verdict, ev, flag(sum.Recomputed), gpusOf[i], stackID[stackOf[i]], strings.Join(sum.Previous, " "))
		if err != nil {
			return fmt.Errorf("bundle %s: %v", sum.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			if deltas[k] == nil {
				deltas[k] = &sigDelta{}
			}
			deltas[k].add(at, sum.ID, ev)
			continue
		}
		var was sigKey
		var wasAt int64
		var wasEv int
		if err := old.QueryRowContext(ctx, sum.ID).Scan(&was.version, &was.fine, &wasAt, &wasEv); err != nil {
			return fmt.Errorf("bundle %s: %v", sum.ID, err)
		}
		if _, err := upd.ExecContext(ctx, sum.Path, at, sum.Host, sum.Job, sum.Rank, sum.SigVersion, sum.Fine, sum.Coarse,
			sum.Title, sum.SigClass, sum.Verdict, ev, flag(sum.Recomputed), gpusOf[i], stackID[stackOf[i]], strings.Join(sum.Previous, " "), sum.ID); err != nil {
			return fmt.Errorf("bundle %s: %v", sum.ID, err)
		}
		if was != k || wasAt != at || wasEv != ev {
			recount[was], recount[k] = true, true
		}
	}
	keys := make([]sigKey, 0, len(deltas)+len(recount))
	for k := range deltas {
		if !recount[k] {
			keys = append(keys, k)
		}
	}
	for k := range recount {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sigKey) int { return cmp.Or(cmp.Compare(a.version, b.version), cmp.Compare(a.fine, b.fine)) })
	for _, k := range keys {
		if recount[k] {
			err = s.recountSignature(ctx, tx, k)
		} else {
			d := deltas[k]
			_, err = tx.ExecContext(ctx, s.d.rebind(`INSERT INTO signatures (sig_version, fine, first, last, last_id, total, evidence)
				VALUES (?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (sig_version, fine) DO UPDATE SET
				first = CASE WHEN excluded.first < signatures.first THEN excluded.first ELSE signatures.first END,
				last_id = CASE WHEN excluded.last > signatures.last OR excluded.last = signatures.last AND excluded.last_id < signatures.last_id
					THEN excluded.last_id ELSE signatures.last_id END,
				last = CASE WHEN excluded.last > signatures.last THEN excluded.last ELSE signatures.last END,
				total = signatures.total + excluded.total,
				evidence = CASE WHEN excluded.evidence > signatures.evidence THEN excluded.evidence ELSE signatures.evidence END`),
				k.version, k.fine, d.first, d.last, d.lastID, d.total, d.evidence)
		}
		if err != nil {
			return fmt.Errorf("signature %d/%s: %v", k.version, k.fine, err)
		}
	}
	return nil
}

// recountSignature counts one signature's row again from bundles (its
// delete locks the row first, so that the count sees every writer that
// added to it before).
func (s *Store) recountSignature(ctx context.Context, tx *sql.Tx, k sigKey) error {
	if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM signatures WHERE sig_version = ? AND fine = ?`), k.version, k.fine); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO signatures (sig_version, fine, first, last, last_id, total, evidence)
		SELECT g.sig_version, g.fine, g.first, g.last,
		  (SELECT x.id FROM bundles x WHERE x.sig_version = g.sig_version AND x.fine = g.fine AND x.time = g.last ORDER BY x.id LIMIT 1),
		  g.total, g.evidence
		FROM (SELECT sig_version, fine, min(time) AS first, max(time) AS last, count(*) AS total, max(evidence) AS evidence
		      FROM bundles WHERE sig_version = ? AND fine = ? GROUP BY sig_version, fine) g`), k.version, k.fine)
	return err
}
