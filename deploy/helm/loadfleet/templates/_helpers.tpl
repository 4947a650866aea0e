{{/* Names: <release>-loadfleet-<part>, or <release>-<part> when the release is named loadfleet. */}}
{{- define "loadfleet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "loadfleet.name" -}}
{{- printf "%s-%s" (include "loadfleet.fullname" .root) .part -}}
{{- end -}}

{{- define "loadfleet.selector" -}}
app.kubernetes.io/name: loadfleet
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .part }}
{{- end -}}

{{- define "loadfleet.labels" -}}
{{ include "loadfleet.selector" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* An image reference from {repository, tag} and the chart's imageRegistry. */}}
{{- define "loadfleet.image" -}}
{{- if .root.Values.imageRegistry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .root.Values.imageRegistry) .image.repository .image.tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository .image.tag -}}
{{- end -}}
{{- end -}}

{{/* Containers of ours: no privileges, nothing written outside their volumes. */}}
{{- define "loadfleet.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: {{ .readOnly }}
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "loadfleet.influxUrl" -}}
{{- printf "http://%s:8086" (include "loadfleet.name" (dict "root" . "part" "influxdb")) -}}
{{- end -}}

{{/* Agent labels as the agent's --labels takes them: k=v,k=v (sorted by key). */}}
{{- define "loadfleet.agentLabels" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
