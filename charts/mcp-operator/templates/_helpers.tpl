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
