{{/* Names, labels and the few facts several templates share. */}}

{{- define "liveplex.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "liveplex.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: liveplex
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "gateway"). */}}
{{- define "liveplex.selector" -}}
app.kubernetes.io/name: liveplex-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end -}}

{{- define "liveplex.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The namespaces the operator watches (and where engine pods run), as a list. */}}
{{- define "liveplex.watched" -}}
{{- if .Values.operator.watch.namespaces -}}
{{- toJson .Values.operator.watch.namespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the Redis URL, and its key. */}}
{{- define "liveplex.redisSecret" -}}
{{- if and (eq .Values.redis.mode "external") .Values.redis.external.existingSecret -}}
{{ .Values.redis.external.existingSecret }}
{{- else -}}
{{ include "liveplex.fullname" . }}-redis-url
{{- end -}}
{{- end -}}

{{- define "liveplex.redisSecretKey" -}}
{{- if and (eq .Values.redis.mode "external") .Values.redis.external.existingSecret -}}
{{ .Values.redis.external.existingSecretKey }}
{{- else -}}
url
{{- end -}}
{{- end -}}

{{/* Env every liveplex container gets: its pod IP (it binds there) and the Redis URL from the Secret. */}}
{{- define "liveplex.env" -}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: LIVEPLEX_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "liveplex.redisSecret" . }}
      key: {{ include "liveplex.redisSecretKey" . }}
- name: LIVEPLEX_REDIS_CA      # the CA of a rediss:// Redis, when the Secret has one
  valueFrom:
    secretKeyRef:
      name: {{ include "liveplex.redisSecret" . }}
      key: ca
      optional: true
{{- end -}}

{{- define "liveplex.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "liveplex.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}
