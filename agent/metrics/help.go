package metrics

import "github.com/kcrash/kcrash/internal/textfile"

// Every series kcrash.prom holds, with its HELP and TYPE, in one place:
// node_exporter refuses a file (node_textfile_scrape_error 1) when a metric
// name comes with two different HELP strings, so they are written once.
const (
	nameCrashes = "kcrash_crashes_total"
	nameEvents  = "kcrash_kernel_events_total"

	nameJournalBytes   = "kcrash_agent_journal_bytes"
	nameJournalRecords = "kcrash_agent_journal_records"
	nameJournalGaps    = "kcrash_agent_journal_gaps"
	nameLost           = "kcrash_agent_kmsg_lost_records"
	nameReading        = "kcrash_agent_kmsg_reading"
	nameLastRecord     = "kcrash_agent_last_record_timestamp_seconds"
	nameGPUSamples     = "kcrash_agent_gpu_samples"
	nameLastGPUSample  = "kcrash_agent_last_gpu_sample_timestamp_seconds"
)

var families = map[string]textfile.Family{
	nameCrashes: {Help: "Crash bundles kcrash runs on this node reported to the agent, by verdict kind (an unknown kind counts as other).", Type: "counter"},
	nameEvents:  {Help: "Kernel records read as GPU or memory trouble, by GPU (PCI address; none when the record names no GPU, unknown when a GPU driver's record does not say which) and kind. Records of one report (the lines of an amdgpu fault, an Xid burst, the OOM report) count once: a GPU and kind is counted at most once a second.", Type: "counter"},

	nameJournalBytes:   {Help: "Bytes of kernel-message journal the agent keeps on disk.", Type: "gauge"},
	nameJournalRecords: {Help: "Kernel records in the agent's journal.", Type: "gauge"},
	nameJournalGaps:    {Help: "Gaps in the agent's journal: runs of kernel records the agent never read (overwritten in the ring, or arriving while it was down).", Type: "gauge"},
	nameLost:           {Help: "Kernel records the journal's gaps account for.", Type: "gauge"},
	nameReading:        {Help: "1 while the agent follows /dev/kmsg, 0 when it cannot read it.", Type: "gauge"},
	nameLastRecord:     {Help: "Wall time of the newest kernel record in the agent's journal, in seconds since the epoch.", Type: "gauge"},
	nameGPUSamples:     {Help: "GPU samples in the agent's ring.", Type: "gauge"},
	nameLastGPUSample:  {Help: "Wall time of the agent's latest GPU sample, in seconds since the epoch.", Type: "gauge"},
}
