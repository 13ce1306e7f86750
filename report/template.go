package report

// pageHTML is the page. The Content-Security-Policy forbids every load (no
// script, font, image or request of any kind): even a bundle crafted to
// smuggle a URL into the page cannot make it reach the network.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
:root{--fg:#1d2330;--mut:#5b6474;--bg:#fff;--line:#d8dce3;--soft:#f4f6f9;--bad:#c62828;--warn:#e07b00;--ok:#2e7d32;--acc:#1f5fbf}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1200px;margin:0 auto;padding:16px 24px 40px}
h1{font-size:22px;margin:4px 0 6px}
h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:14px;margin:14px 0 4px}
.verdict{border-left:6px solid var(--bad);background:#fdf1f1;padding:10px 14px;border-radius:4px}
.verdict.k-clean_exit{border-color:var(--ok);background:#eef7ee}
.verdict.k-killed,.verdict.k-hang,.verdict.k-unknown{border-color:var(--warn);background:#fff6ea}
.badge{display:inline-block;font-size:12px;padding:1px 8px;border-radius:10px;background:var(--fg);color:#fff;margin-left:8px;vertical-align:middle}
.summary{font-size:15px;margin:4px 0 0}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}
th,td{text-align:left;vertical-align:top;padding:3px 8px;border-bottom:1px solid var(--line);overflow-wrap:break-word}
td:first-child{white-space:nowrap}
th{background:var(--soft);font-weight:600}
table.meta th{width:110px;background:none;color:var(--mut);font-weight:500}
pre,code{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0}
.ev pre{background:var(--soft);padding:4px 8px;border-radius:3px}
.role{font-weight:600}
.mut,.note{color:var(--mut)}
.note{font-size:12.5px;margin:2px 0 6px}
ol.steps li{margin:3px 0}
.term{background:#11151c;color:#e6e6e6;padding:10px 12px;border-radius:4px;max-height:520px;overflow:auto}
.kmsg{background:var(--soft);padding:8px 12px;border-radius:4px;max-height:420px;overflow:auto}
details>summary{cursor:pointer;color:var(--acc);font-weight:600;margin:14px 0 4px}
svg.tl{display:block;width:100%;height:auto;margin:2px 0 4px;font:11px system-ui,sans-serif}
svg.tl .frame{fill:#fbfcfd;stroke:var(--line)}
svg.tl .grid line{stroke:#e9ecf1}
svg.tl .grid text{fill:var(--mut);font-size:10px}
svg.tl .lbl{fill:var(--fg);text-anchor:end}
svg.tl .sub{fill:var(--mut);text-anchor:end;font-size:10px}
svg.tl .line{fill:none;stroke-width:1.4;stroke-linejoin:round}
svg.tl .area{stroke:none}
svg.tl .used{stroke:var(--acc)} svg.tl .area.used{fill:#1f5fbf22}
svg.tl .host{stroke:#555e6e} svg.tl .area.host{fill:#555e6e1c}
svg.tl .cg{stroke:#7b3fb8} svg.tl .rss{stroke:#0a8a7d}
svg.tl .dot.used,svg.tl .peak.used{fill:var(--acc)} svg.tl .dot.host,svg.tl .peak.host{fill:#555e6e}
svg.tl .dot.cg,svg.tl .peak.cg{fill:#7b3fb8} svg.tl .dot.rss,svg.tl .peak.rss{fill:#0a8a7d}
svg.tl .peak{stroke:#fff;stroke-width:1}
svg.tl .child{fill:#e07b0033;stroke:#e07b00;stroke-width:.6}
svg.tl .level{stroke-dasharray:5 3;stroke-width:1}
svg.tl .level.memtotal{stroke:#8a93a3} svg.tl text.memtotal{fill:var(--mut);font-size:10px}
svg.tl .level.limit{stroke:var(--bad)} svg.tl text.limit{fill:var(--bad);font-size:10px}
svg.tl .life line{stroke:#8a93a3;stroke-width:3}
svg.tl .life.root line{stroke:var(--acc)}
svg.tl .life.faulting line{stroke:var(--bad);stroke-width:4}
svg.tl .life.faulting .lbl{fill:var(--bad);font-weight:700}
svg.tl .birth{fill:#fff;stroke:#555e6e;stroke-width:1.2}
svg.tl .death.sig{stroke:var(--bad);stroke-width:2}
svg.tl .death.bad{fill:var(--warn)}
svg.tl line.death{stroke:#555e6e;stroke-width:1.5}
svg.tl text.sig{fill:var(--bad);font-size:10px;font-weight:600}
svg.tl .vmark{stroke-width:1;stroke-dasharray:3 3;opacity:.8}
svg.tl .ev path{stroke:#fff;stroke-width:.8}
svg.tl .ev text{font-size:10px;fill:var(--fg)}
svg.tl .k-fault{stroke:var(--bad)} svg.tl .ev.k-fault path{fill:var(--bad)}
svg.tl .k-xid{stroke:#b0006e} svg.tl .ev.k-xid path{fill:#b0006e}
svg.tl .k-oom{stroke:#6a1b9a} svg.tl .ev.k-oom path{fill:#6a1b9a}
svg.tl .k-reset{stroke:#ad5a00} svg.tl .ev.k-reset path{fill:#ad5a00}
svg.tl .k-hang{stroke:var(--warn)} svg.tl .ev.k-hang path{fill:var(--warn)}
svg.tl .k-exit{stroke:#1d2330} svg.tl .ev.k-exit path{fill:#1d2330}
svg.tl .ev.k-other path{fill:#8a93a3} svg.tl .ev.k-unrelated path{fill:#c5cad3}
svg.tl .apibar{fill:#0a8a7d;opacity:.55}
svg.tl .apimark line{stroke-width:2}
svg.tl .apimark.k-fault line{stroke:var(--bad)} svg.tl .apimark.k-fault text{fill:var(--bad)}
svg.tl .apimark.k-nonfinite line{stroke:var(--warn)} svg.tl .apimark.k-nonfinite text{fill:var(--warn)}
svg.tl .rank .run{fill:#8a93a3} svg.tl .rank.first .run{fill:var(--bad)} svg.tl .rank.secondary .run{fill:#c5cad3}
svg.tl .rank.first .lbl{fill:var(--bad);font-weight:700}
svg.tl .tick.ev{stroke:var(--warn);stroke-width:2} svg.tl .tick.exit{stroke:#1d2330;stroke-width:2}
svg.tl .firstfail circle{fill:none;stroke:var(--bad);stroke-width:2.5} svg.tl .firstfail text{fill:var(--bad);font-weight:700;font-size:11px}
.st-ok{color:var(--ok)} .st-error,.st-timeout{color:var(--bad)} .st-skipped{color:var(--mut)}
@media print{.term,.kmsg{max-height:none}}
</style>
</head>
<body>
<main>
<section id="verdict" class="verdict k-{{.Kind}}" data-kind="{{.Kind}}">
<h1>{{.Kind}}{{if .Confidence}}<span class="badge">{{.Confidence}} confidence</span>{{end}}</h1>
{{if .Summary}}<p class="summary">{{.Summary}}</p>{{end}}
</section>

<table class="meta">
{{range .Meta}}<tr><th>{{.K}}</th><td>{{if eq .K "Command"}}<code>{{.V}}</code>{{else}}{{.V}}{{end}}</td></tr>
{{end}}</table>

{{if .Findings}}<h2>Evidence</h2>
{{range .Findings}}<div class="ev" id="finding-{{.N}}"><div><span class="role">{{if .Role}}{{.Role}}{{else}}evidence{{end}}</span> · {{.Kind}} · <code>{{.Where}}</code>{{if .When}} · {{.When}}{{end}}</div><pre>{{.Text}}</pre></div>
{{end}}{{end}}

{{if .Suspect}}<h2>Suspect kernel-API call</h2>
<table class="meta">{{range .Suspect}}<tr><th>{{.K}}</th><td><code>{{.V}}</code></td></tr>
{{end}}</table>{{end}}

{{if .NextSteps}}<h2>Next steps</h2>
<ol class="steps">{{range .NextSteps}}<li>{{range .}}{{if .Code}}<code>{{.Text}}</code>{{else}}{{.Text}}{{end}}{{end}}</li>
{{end}}</ol>{{end}}

<h2>Timeline</h2>
{{if .AxisNote}}<p class="note">{{.AxisNote}}</p>{{end}}
{{range .Charts}}<section class="chart" id="chart-{{.Name}}"><h3>{{.Title}}</h3><p class="note">{{.Note}}</p>
{{.SVG}}
</section>
{{end}}{{range .NoCharts}}<p class="note nochart">{{.}}</p>
{{end}}

{{range .Tables}}{{if .Folded}}<details><summary>{{.Title}}</summary>{{else}}<h3>{{.Title}}</h3>{{end}}{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
<table class="data"><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{if .Folded}}</details>{{end}}
{{end}}

{{if .Output}}<h2>Output</h2><p class="note">{{.OutputNote}}</p>
<pre class="term" id="output">{{.Output}}</pre>{{end}}

{{if .Kmsg}}<h2>Kernel messages</h2><p class="note">{{.KmsgNote}}</p>
<pre class="kmsg" id="kmsg">{{.Kmsg}}</pre>{{end}}

{{if or .Stack .StackRows .StackIssues}}<h2>Software</h2>{{if .Stack}}<p id="stack">{{.Stack}}</p>{{end}}
{{if .StackIssues}}<ul class="issues">{{range .StackIssues}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .StackRows}}<table class="data" id="software"><tr><th>package / runtime</th><th>version</th><th>build</th><th>installed</th></tr>
{{range .StackRows}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td><td>{{index . 2}}</td><td>{{index . 3}}</td></tr>
{{end}}</table>{{end}}{{end}}

{{if .Collectors}}<h2>Collectors</h2>
<table class="data" id="collectors"><tr><th>collector</th><th>status</th><th>took</th><th>error</th><th>files</th></tr>
{{range .Collectors}}<tr><td>{{index . 0}}</td><td class="st-{{index . 1}}">{{index . 1}}</td><td>{{index . 2}}</td><td>{{index . 3}}</td><td>{{index . 4}}</td></tr>
{{end}}</table>{{end}}

{{if .Notes}}<h2>Notes</h2><ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p class="note">{{.Footer}}</p>
</main>
</body>
</html>
`
