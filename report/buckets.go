package report

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"

	"github.com/kcrash/kcrash/fleet/bucket"
)

// BucketsPage renders `kcrash buckets --html`: the buckets with their class
// and why, then the hardware-suspect GPUs. Same page frame as a bundle's
// report (no script, no load of any kind).
func BucketsPage(rep *bucket.Report, read, recomputed int) ([]byte, error) {
	v := bucketsView{Title: fmt.Sprintf("kcrash buckets: %d buckets", len(rep.Buckets)),
		Line: fmt.Sprintf("%d buckets from %d bundles since %s", len(rep.Buckets), rep.Bundles, rep.Since.UTC().Format("2006-01-02 15:04 MST")),
		Note: fmt.Sprintf("Classes count the last %s: a GPU is hardware-suspect with ≥ %d faults under ≥ 2 coarse signatures or stacks, or a hardware record; a bucket is software-suspect when its coarse signature is on ≥ %d GPUs of ≥ %d hosts. %d bundles read now, %d signatures recomputed.",
			rep.Window, rep.K, rep.M, rep.N, read, recomputed)}
	for _, b := range rep.Buckets {
		isNew := ""
		if b.New {
			isNew = "new"
		}
		v.Buckets = append(v.Buckets, bucketRow{Signature: b.Signature, Count: b.Count, New: isNew, Class: b.Class,
			First: b.FirstSeen.UTC().Format("2006-01-02 15:04"), Last: b.LastSeen.UTC().Format("2006-01-02 15:04"),
			Hosts: listText(b.Hosts, 6), GPUs: listText(b.GPUs, 4), Title: b.Title, Reason: b.Reason, Stacks: listText(b.Stacks, 3),
			Previous: listText(b.Previous, 4)})
	}
	for _, g := range rep.GPUs {
		if g.Class != bucket.Hardware {
			continue
		}
		v.GPUs = append(v.GPUs, []string{g.ID, g.Host, g.BusID, g.Name, g.Serial, fmt.Sprint(g.Faults), g.Reason})
	}
	var out bytes.Buffer
	if err := bucketsTmpl.Execute(&out, v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

type bucketsView struct {
	Title, Line, Note string
	Buckets           []bucketRow
	GPUs              [][]string
}

type bucketRow struct {
	Signature, New, Class, First, Last, Hosts, GPUs, Title, Reason, Stacks, Previous string
	Count                                                                            int
}

// listText shows at most n items and how many more there are.
func listText(l []string, n int) string {
	if len(l) <= n {
		return strings.Join(l, ", ")
	}
	return strings.Join(l[:n], ", ") + fmt.Sprintf(" and %d more", len(l)-n)
}

var bucketsTmpl = template.Must(template.New("buckets").Parse(pageHTML[:strings.Index(pageHTML, "<body>")] + `<body>
<main>
<section id="verdict" class="verdict k-unknown"><h1>{{.Line}}</h1></section>
<p class="note">{{.Note}}</p>
<h2>Buckets</h2>
<table class="data" id="buckets"><tr><th>signature</th><th>count</th><th>new</th><th>class</th><th>first seen</th><th>last seen</th><th>hosts</th><th>GPUs</th><th>title</th></tr>
{{range .Buckets}}<tr><td><code>{{.Signature}}</code></td><td>{{.Count}}</td><td>{{.New}}</td><td class="role">{{.Class}}</td><td>{{.First}}</td><td>{{.Last}}</td><td>{{.Hosts}}</td><td>{{.GPUs}}</td><td>{{.Title}}<div class="note">{{.Reason}}</div>{{if .Stacks}}<div class="note">stacks: {{.Stacks}}</div>{{end}}{{if .Previous}}<div class="note">before: {{.Previous}}</div>{{end}}</td></tr>
{{end}}</table>
{{if .GPUs}}<h2>Hardware-suspect GPUs</h2>
<table class="data" id="gpus"><tr><th>GPU</th><th>host</th><th>bus id</th><th>name</th><th>serial</th><th>faults</th><th>why</th></tr>
{{range .GPUs}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
<p class="note">Made by kcrash buckets from the bundles' manifests. The page is self-contained: it loads nothing and needs no JavaScript.</p>
</main>
</body>
</html>
`))
