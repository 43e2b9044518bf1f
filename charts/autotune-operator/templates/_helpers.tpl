{{/*
The chart name, or nameOverride.
*/}}
{{- define "autotune-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's objects: fullnameOverride, or <release>-<chart> unless the release name
already holds the chart name. Truncated to 63 characters, the limit of a DNS-1123 label.
*/}}
{{- define "autotune-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The chart label: name and version, with "+" (not allowed in a label value) replaced.
*/}}
{{- define "autotune-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "autotune-operator.labels" -}}
helm.sh/chart: {{ include "autotune-operator.chart" . }}
{{ include "autotune-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: autotune-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels: only the ones that never change across upgrades, because a Deployment's selector
is immutable.
*/}}
{{- define "autotune-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "autotune-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The operator's ServiceAccount.
*/}}
{{- define "autotune-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "autotune-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator's image.
*/}}
{{- define "autotune-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The rules for the namespaced resources the operator reads and writes: granted cluster-wide by a
ClusterRole, or per watched namespace by a Role when watchNamespaces is set. They list exactly the
calls the operator makes.
*/}}
{{- define "autotune-operator.namespacedRules" -}}
{{- /*
Only the verbs the operator sends; the e2e tier compares these rules with the API server's audit
log of a whole run. AutotuneJobs are read through a watch and written through their status; a job
that tunes for several GPU models has the operator create one AutotuneJob per model, which it
controls.
*/}}
- apiGroups: ["autotune.io"]
  resources: ["autotunejobs"]
  verbs: ["list", "watch", "create"]
- apiGroups: ["autotune.io"]
  resources: ["autotunejobs/status"]
  verbs: ["update"]
# Trial Pods carry an ownerReference with blockOwnerDeletion to their job; clusters that enforce
# OwnerReferencesPermissionEnforcement require update on the owner's finalizers for that.
- apiGroups: ["autotune.io"]
  resources: ["autotunejobs/finalizers"]
  verbs: ["update"]
# Trial Pods: the operator creates them, watches them for results and deletes finished ones; it
# reads one by name when its name is taken, and patches one to take its finalizer
# (autotune.io/trial-result) off once the job's status holds its result.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# The output ConfigMap with the best DeepSpeed config: created, then read and applied only when
# this job wrote it. Measurements kept for reuse (labelled autotune.io/measurement): watched,
# created, applied over one of the same name that the operator sealed (the same job's, written
# again after a crash), and deleted past
# measurements.perNamespace (only those it sealed, each by UID).
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
# The afterTuning Job, created once the search succeeds; a multi-node trial's Indexed Job,
# created at launch, watched (a trial whose Pods the Job controller has yet to make is pending,
# not gone) and deleted, with its Pods, once the trial is recorded; read by name when its name is
# taken, to tell whose it is.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "delete", "list", "watch"]
# A multi-node trial's headless Service, which gives its Pods their host names; read by name when
# its name is taken, to tell whose it is.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "create", "delete"]
{{- if .Values.kueue.enabled }}
# With kueue.enabled: Kueue's Workloads, read to say why a trial waits for admission, and its
# LocalQueues, read to tell a queue that does not exist.
- apiGroups: ["kueue.x-k8s.io"]
  resources: ["workloads", "localqueues"]
  verbs: ["list", "watch"]
{{- end }}
{{- end }}

{{/*
A label map as "key=value, ..." for messages.
*/}}
{{- define "autotune-operator.labelList" -}}
{{- $pairs := list }}
{{- range $key, $value := . }}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) }}
{{- end }}
{{- join ", " $pairs }}
{{- end }}
