package calldiff

// Myers' O((N+M)·D) shortest edit script ("An O(ND) Difference Algorithm and
// Its Variations", 1986) over interned API names. The trace keeps the
// furthest-reaching x of every diagonal per step, D² ints in all, so D is
// capped: two windows with more edits than that are reported as unaligned.

type opKind uint8

const (
	opEq  opKind = iota // the same call in both
	opDel               // a call only in A
	opIns               // a call only in B
)

type op struct {
	kind opKind
	a, b int // indexes into A and B (the one that does not apply is -1)
}

// align returns the edit script turning a into b, or ok=false when it needs
// more than maxD edits.
func align(a, b []int32, maxD int) (ops []op, ok bool) {
	n, m := len(a), len(b)
	max := n + m
	if maxD > max {
		maxD = max
	}
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	var trace [][]int32
	found := -1
	for d := 0; d <= maxD && found < 0; d++ {
		// Keep only the diagonals -d..d of this step.
		snap := make([]int32, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				found = d
			}
		}
		for k := -d; k <= d; k++ {
			snap[k+d] = v[off+k]
		}
		trace = append(trace, snap)
	}
	if found < 0 {
		return nil, false
	}
	// Walk back from (n, m).
	x, y := n, m
	var rev []op
	for d := found; d > 0; d-- {
		prev := trace[d-1]
		get := func(k int) int {
			if k < -(d-1) || k > d-1 {
				return -1
			}
			return int(prev[k+d-1])
		}
		k := x - y
		var pk int
		if k == -d || k != d && get(k-1) < get(k+1) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, op{opEq, x, y})
		}
		if x == px {
			y--
			rev = append(rev, op{opIns, -1, y})
		} else {
			x--
			rev = append(rev, op{opDel, x, -1})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, op{opEq, x, y})
	}
	ops = make([]op, len(rev))
	for i := range rev {
		ops[i] = rev[len(rev)-1-i]
	}
	return ops, true
}
