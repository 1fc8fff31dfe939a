{{- define "mcp-operator.selectorLabels" -}}
app.kubernetes.io/name: mcp-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "mcp-operator.labels" -}}
{{ include "mcp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "mcp-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- /*
The namespaces the operator watches, as a JSON list ([] = every namespace, clusterWide only).
Least privilege by default: without clusterWide, watchNamespaces must be exact names (empty: the
release's own namespace), each of which gets the working Role; a glob names namespaces nobody
listed, so only a cluster-wide install can serve it and the chart refuses it otherwise.
*/ -}}
{{- define "mcp-operator.watchNamespaces" -}}
{{- $globs := list }}
{{- range .Values.watchNamespaces }}{{ if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .) }}{{ $globs = append $globs . }}{{ end }}{{ end }}
{{- if and $globs (not .Values.clusterWide) }}
{{- fail (printf "watchNamespaces: %s: a pattern, not a namespace's name; the operator holds its working rights only in namespaces named exactly (a Role in each): name them, or set clusterWide=true to grant those rights in every namespace (kube-system's Secrets included)" (join ", " $globs)) }}
{{- end }}
{{- if .Values.clusterWide }}
{{- .Values.watchNamespaces | toJson }}
{{- else }}
{{- .Values.watchNamespaces | default (list .Release.Namespace) | toJson }}
{{- end }}
{{- end -}}
