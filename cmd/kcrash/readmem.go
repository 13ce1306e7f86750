package main

import "runtime/debug"

// readerHeap is the heap the bundle readers (show, report, merge, diff)
// aim to stay within. What they keep is bounded well below it; without a
// limit the collector lets the heap grow to twice what is live before it
// runs, and a bundle's transient decoding would show as peak RSS past the
// 64 MiB the README promises. A soft limit: a reader that needs more runs
// on, only with more collections.
const readerHeap = 40 << 20

func boundReaderHeap() { debug.SetMemoryLimit(readerHeap) }
