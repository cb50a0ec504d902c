{{/* Chart name. */}}
{{- define "brain-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: release-chart, or the release name when it already contains the chart name. */}}
{{- define "brain-operator.fullname" -}}
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

{{- define "brain-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "brain-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "brain-operator.labels" -}}
{{ include "brain-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: brain-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "brain-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "brain-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "brain-operator.peeringName" -}}
{{- default (include "brain-operator.fullname" .) .Values.peering.name -}}
{{- end -}}

{{/* Watched namespaces in namespaced mode (the release namespace when none is given). */}}
{{- define "brain-operator.watchNamespaces" -}}
{{- if .Values.watch.namespaces -}}
{{- toJson .Values.watch.namespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{- define "brain-operator.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* RBAC rules generated from brain_operator.rbac by hack/chart-sync.py; "why" becomes a comment. */}}
{{- define "brain-operator.rules" -}}
{{- range . }}
# {{ .why }}
- apiGroups: {{ toJson .apiGroups }}
  resources: {{ toJson .resources }}
  verbs: {{ toJson .verbs }}
{{- end }}
{{- end -}}
