{{/* Names: the release name when it already names the chart, else release-chart. */}}
{{- define "trainplace.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trainplace.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object's metadata. */}}
{{- define "trainplace.labels" -}}
app.kubernetes.io/name: {{ include "trainplace.name" . }}
app.kubernetes.io/part-of: trainplace
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The webhook pods' selector (immutable on a Deployment: keep it small and stable). */}}
{{- define "trainplace.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trainplace.name" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "trainplace.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "trainplace.tlsSecretName" -}}
{{- if and (eq .Values.certificates.mode "provided") .Values.certificates.provided.secretName -}}
{{- .Values.certificates.provided.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "trainplace.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "trainplace.markKeysSecretName" -}}
{{- default (printf "%s-mark-keys" (include "trainplace.fullname" .)) .Values.markKeys.existingSecret -}}
{{- end -}}

{{- define "trainplace.policyConfigMapName" -}}
{{- default (printf "%s-policy" (include "trainplace.fullname" .)) .Values.policy.existingConfigMap -}}
{{- end -}}

{{/*
The certificate mode, checked once: every template that depends on it includes this.
*/}}
{{- define "trainplace.certMode" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if eq $mode "provided" -}}
{{- if not .Values.certificates.provided.caBundle -}}
{{- fail "certificates.mode=provided needs certificates.provided.caBundle: the PEM CA that signed the serving certificate (the API server verifies the webhook with it)" -}}
{{- end -}}
{{- if and (not .Values.certificates.provided.secretName) (not (and .Values.certificates.provided.tlsCrt .Values.certificates.provided.tlsKey)) -}}
{{- fail "certificates.mode=provided needs certificates.provided.secretName (an existing kubernetes.io/tls Secret) or both certificates.provided.tlsCrt and tlsKey" -}}
{{- end -}}
{{- end -}}
{{- $mode -}}
{{- end -}}
