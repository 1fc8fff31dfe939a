"""The page, one Jinja2 template with its style inline: the file is mailed, attached to CI runs
and opened offline, so it loads nothing from anywhere. Autoescaped: URLs, notes and findings come
from the measured server and the plan."""

from __future__ import annotations

import jinja2

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{ view.title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
/* a narrow window: a wide table scrolls in its own box, the page never sideways */
table { display: block; max-width: 100%; overflow-x: auto; } dd { overflow-wrap: anywhere; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }
th { background: #f0f3f7; } td:first-child, th:first-child { text-align: left; }
table.text td, table.text th { text-align: left; }
.verdict { display: inline-block; padding: 0.2em 0.8em; border-radius: 0.3em; font-weight: bold; }
.Pass, .met { background: #dff3e0; } .Fail, .missed, .Found { background: #fbe0e0; }
/* marks drawn, not typed: an emoji or symbol font may be missing where the file is opened */
td[class] { white-space: nowrap; }  /* a verdict or a state: one word, its mark beside it */
td[class]::before, .verdict::before { content: ""; display: inline-block; width: 0.6em; height: 0.6em;
  border-radius: 50%; margin-right: 0.4em; vertical-align: 0.05em; background: #888; }
td.Pass::before, .verdict.Pass::before, .verdict.met::before { background: #2e7d32; }
td.Fail::before, td.Found::before, .verdict.Fail::before, .verdict.missed::before { background: #c62828; }
.note { color: #666; } img { max-width: 100%; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; } dd { margin: 0; }
code { font-size: 0.95em; }
</style>
</head>
<body>
<h1>{{ view.title }}</h1>
<p><span id="verdict" class="verdict {{ view.verdict.split()[-1] }}">{{ view.verdict }}</span></p>
<dl id="facts">
{% for name, value in view.facts %}<dt>{{ name }}</dt><dd>{{ value }}</dd>
{% endfor %}</dl>

{% macro table(t, cls="") %}
<table id="{{ t.id }}"{% if cls %} class="{{ cls }}"{% endif %}>
<thead><tr>{% for h in t.headers %}<th>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>
{% for row in t.rows %}<tr>
{%- for cell in row %}<td{% if cell in ("Pass", "Fail") %} class="{{ cell }}"{% endif %}>{{ cell }}</td>
{%- endfor %}</tr>
{% endfor %}</tbody>
</table>
{% endmacro %}

{% for t in view.extra %}
<h2>{{ t.title }}</h2>
{{ table(t, "text") }}
{% endfor %}

<h2>Per level</h2>
{{ table(view.tables["levels"]) }}
{% if view.telemetry_note %}<p class="note" id="telemetry-note" title="{{ view.telemetry_detail }}">
{{- view.telemetry_note }}</p>{% endif %}
{% if charts.overview %}
<img id="chart-levels" alt="latency, throughput and GPU per level" src="{{ charts.overview }}">
{% endif %}

{% if "schedule" in view.tables %}
<h2>Schedule lag</h2>
{{ table(view.tables["schedule"]) }}
{% if charts.schedule_lag %}
<img id="chart-schedule" alt="schedule lag per level" src="{{ charts.schedule_lag }}">
{% endif %}
{% endif %}

{% if charts.telemetry %}
<h2>GPU telemetry over time</h2>
<img id="chart-telemetry" alt="GPU telemetry over the run" src="{{ charts.telemetry }}">
{% endif %}

{% if "memory" in view.tables %}
<h2>GPU memory per level</h2>
{{ table(view.tables["memory"]) }}
{% if "memory-findings" in view.tables %}{{ table(view.tables["memory-findings"], "text") }}{% endif %}
{% endif %}

{% if "breakdown" in view.tables %}
<h2>Per class</h2>
{{ table(view.tables["breakdown"]) }}
{% endif %}

{% if "slo" in view.tables %}
<h2>SLO judgements</h2>
{{ table(view.tables["slo"], "text") }}
{% endif %}

<h2>Diagnosis</h2>
<table id="findings" class="text">
<thead><tr><th>Trap</th><th>Name</th><th>State</th><th>Level</th><th>Evidence</th><th>Source</th></tr></thead>
<tbody>
{% for f in view.findings %}<tr><td>{{ f.label }}</td><td>{{ f.name }}</td>
<td class="{{ f.state }}">{{ f.state }}</td><td>{{ f.level or "" }}</td><td>{{ f.summary }}
{%- if f.state == "Found" and f.advice %}<br><em>{{ f.advice }}</em>
{%- elif f.state == "NoData" and f.needs %} (needs: {{ f.needs }}){% endif %}</td>
<td>{{ f.source }}</td></tr>
{% endfor %}</tbody>
</table>

<h2>Engine</h2>
{{ table(view.tables["engine"], "text") }}
{% if view.notes %}
<h2>Notes</h2>
<ul id="notes">{% for n in view.notes %}<li>{{ n }}</li>{% endfor %}</ul>
{% endif %}
<p>CRC-32C of the result document: <code id="crc32c">{{ view.crc32c }}</code></p>
</body>
</html>
"""


def page() -> jinja2.Template:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)
    return env.from_string(PAGE)
