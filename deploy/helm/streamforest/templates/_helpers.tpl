{{/* Names and labels */}}
{{- define "streamforest.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "streamforest.fullname" -}}
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

{{/* the workers' pods; the topics job's pods have component "topics", so no selector takes them */}}
{{- define "streamforest.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamforest.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "streamforest.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "streamforest.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: streamforest
{{- end }}

{{- define "streamforest.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "streamforest.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "streamforest.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Deployment, or StatefulSet when static membership needs stable member names */}}
{{- define "streamforest.workloadKind" -}}
{{- if .Values.worker.staticMembership }}StatefulSet{{ else }}Deployment{{ end }}
{{- end }}

{{/* Container memory in MiB: baseline + state budget + headroom (see values.yaml, memory) */}}
{{- define "streamforest.memoryMiB" -}}
{{- $budget := .Values.worker.stateBudgetMB | float64 }}
{{- $headroom := mulf $budget (divf (.Values.memory.headroomPercent | float64) 100.0) }}
{{- addf (.Values.memory.baselineMiB | float64) $budget $headroom | ceil | int }}
{{- end }}

{{/* The worker exits within worker.shutdownTimeoutSeconds of SIGTERM (its watchdog ends the process
     then); the margin covers the kubelet's signal delivery and the last log lines. */}}
{{- define "streamforest.terminationGrace" -}}
{{- add (.Values.worker.shutdownTimeoutSeconds | float64 | ceil | int) .Values.worker.terminationGraceMarginSeconds }}
{{- end }}

{{- define "streamforest.maxReplicas" -}}
{{- if .Values.autoscaling.maxReplicaCount }}{{ .Values.autoscaling.maxReplicaCount | int }}{{ else }}{{ .Values.topics.partitions | int }}{{ end }}
{{- end }}

{{- define "streamforest.sasl" -}}
{{- if hasPrefix "SASL" (upper .Values.kafka.securityProtocol) }}true{{ end }}
{{- end }}

{{- define "streamforest.tls" -}}
{{- if hasSuffix "SSL" (upper .Values.kafka.securityProtocol) }}true{{ end }}
{{- end }}

{{/* Checks of values that would otherwise fail only at run time */}}
{{- define "streamforest.validate" -}}
{{- $protocol := upper .Values.kafka.securityProtocol }}
{{- if not (has $protocol (list "PLAINTEXT" "SSL" "SASL_PLAINTEXT" "SASL_SSL")) }}
{{- fail (printf "kafka.securityProtocol: %s is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" .Values.kafka.securityProtocol) }}
{{- end }}
{{- if include "streamforest.sasl" . }}
{{- if not .Values.kafka.saslMechanism }}
{{- fail (printf "kafka.saslMechanism is required with kafka.securityProtocol %s" $protocol) }}
{{- end }}
{{- if not .Values.kafka.auth.existingSecret }}
{{- fail "kafka.auth.existingSecret: name the Secret that holds the SASL username and password" }}
{{- end }}
{{- end }}
{{- if and .Values.kafka.tls.enabled (not .Values.kafka.tls.secretName) }}
{{- fail "kafka.tls.secretName: name the Secret that holds the CA (and client) certificates" }}
{{- end }}
{{- if and .Values.kafka.tls.enabled (not (include "streamforest.tls" .)) }}
{{- fail "kafka.tls.enabled needs kafka.securityProtocol SSL or SASL_SSL" }}
{{- end }}
{{- $managed := list }}
{{- range (include "streamforest.env" (dict "root" . "worker" true "chartOnly" true) | fromYamlArray) }}
{{- $managed = append $managed .name }}
{{- end }}
{{- range $name, $_ := .Values.env }}
{{- if has $name $managed }}
{{- fail (printf "env.%s is set by the chart from its values (see values.yaml): set it there" $name) }}
{{- end }}
{{- end }}
{{- if and (include "streamforest.keda" .) (gt (include "streamforest.maxReplicas" . | int) (.Values.topics.partitions | int)) }}
{{- fail (printf "autoscaling.maxReplicaCount %d exceeds topics.partitions %d: the replicas beyond the partitions would stand idle" (include "streamforest.maxReplicas" . | int) (.Values.topics.partitions | int)) }}
{{- end }}
{{- if and (include "streamforest.keda" .) (gt (.Values.autoscaling.minReplicaCount | int) (include "streamforest.maxReplicas" . | int)) }}
{{- fail "autoscaling.minReplicaCount exceeds the maximum replica count" }}
{{- end }}
{{- end }}

{{/* STREAMFOREST_* environment of the workers and of the topics job.
     Arguments: dict "root" $ "worker" true|false (worker-only settings) ["chartOnly" true: without
     the user's `env`] */}}
{{- define "streamforest.env" -}}
{{- $v := .root.Values }}
- name: STREAMFOREST_KAFKA__BOOTSTRAP_SERVERS
  value: {{ $v.kafka.bootstrapServers | quote }}
- name: STREAMFOREST_KAFKA__GROUP_ID
  value: {{ $v.kafka.groupId | quote }}
- name: STREAMFOREST_KAFKA__SECURITY_PROTOCOL
  value: {{ upper $v.kafka.securityProtocol | quote }}
{{- if include "streamforest.sasl" .root }}
- name: STREAMFOREST_KAFKA__SASL_MECHANISM
  value: {{ upper $v.kafka.saslMechanism | quote }}
- name: STREAMFOREST_KAFKA__SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $v.kafka.auth.existingSecret | quote }}
      key: {{ $v.kafka.auth.usernameKey | quote }}
- name: STREAMFOREST_KAFKA__SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $v.kafka.auth.existingSecret | quote }}
      key: {{ $v.kafka.auth.passwordKey | quote }}
{{- end }}
{{- if $v.kafka.tls.enabled }}
- name: STREAMFOREST_KAFKA__SSL_CA_LOCATION
  value: {{ printf "%s/%s" $v.kafka.tls.mountPath $v.kafka.tls.caKey | quote }}
{{- if and $v.kafka.tls.certKey $v.kafka.tls.keyKey }}
- name: STREAMFOREST_KAFKA__SSL_CERTIFICATE_LOCATION
  value: {{ printf "%s/%s" $v.kafka.tls.mountPath $v.kafka.tls.certKey | quote }}
- name: STREAMFOREST_KAFKA__SSL_KEY_LOCATION
  value: {{ printf "%s/%s" $v.kafka.tls.mountPath $v.kafka.tls.keyKey | quote }}
{{- if $v.kafka.auth.existingSecret }}
- name: STREAMFOREST_KAFKA__SSL_KEY_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $v.kafka.auth.existingSecret | quote }}
      key: {{ $v.kafka.auth.sslKeyPasswordKey | quote }}
      optional: true
{{- end }}
{{- end }}
{{- end }}
{{- with $v.kafka.extra }}
- name: STREAMFOREST_KAFKA__EXTRA
  value: {{ toJson . | quote }}
{{- end }}
{{- range $field := list "instances" "features" "predictions" "drift" "rankings" "deadletter" "checkpoints" "latest" }}
- name: STREAMFOREST_TOPICS__{{ upper $field }}
  value: {{ index $v.topics $field | quote }}
{{- end }}
- name: STREAMFOREST_TOPICS__PARTITIONS
  value: {{ $v.topics.partitions | int | quote }}
- name: STREAMFOREST_TOPICS__REPLICATION_FACTOR
  value: {{ $v.topics.replicationFactor | int | quote }}
- name: STREAMFOREST_WORKER__LOG_LEVEL
  value: {{ upper $v.worker.logLevel | quote }}
{{- if .worker }}
- name: STREAMFOREST_WORKER__METRICS_PORT
  value: {{ $v.worker.metricsPort | int | quote }}
- name: STREAMFOREST_WORKER__STATE_BUDGET_MB
  value: {{ $v.worker.stateBudgetMB | quote }}
- name: STREAMFOREST_WORKER__SHUTDOWN_TIMEOUT_S
  value: {{ $v.worker.shutdownTimeoutSeconds | quote }}
{{- if $v.worker.staticMembership }}
- name: STREAMFOREST_WORKER__STATIC_MEMBERSHIP
  value: "true"
# the pod name: stable across restarts of a StatefulSet pod, so it is the group.instance.id and
# names the transactional id
- name: STREAMFOREST_WORKER__MEMBER_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- end }}
{{- if not .chartOnly }}
{{- range $name, $value := $v.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- end }}

{{- define "streamforest.tlsVolume" -}}
{{- if .Values.kafka.tls.enabled }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.secretName | quote }}
{{- end }}
{{- end }}

{{- define "streamforest.tlsMount" -}}
{{- if .Values.kafka.tls.enabled }}
- name: kafka-tls
  mountPath: {{ .Values.kafka.tls.mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The configuration file (TOML, docs/configuration.md) of the structured values `learners` and
     `profiles`. Every value is written as TOML's inline form of its JSON (numbers stay whole where
     YAML had them whole: Helm's toToml would write 50 as 50.0); a null value is left out. */}}
{{- define "streamforest.configFile" -}}
# rendered by the streamforest chart from its values `learners`, `profiles` and `output`;
# STREAMFOREST_* variables (the chart's `env`) override it key by key
{{- with .Values.learners }}

[learners]
{{- range $key, $value := . }}
{{- if not (kindIs "invalid" $value) }}
{{ toJson $key }} = {{ include "streamforest.tomlValue" $value }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.output }}

[output]
{{- range $key, $value := . }}
{{- if not (kindIs "invalid" $value) }}
{{ toJson $key }} = {{ include "streamforest.tomlValue" $value }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.profiles }}

[[profiles]]
{{- range $key, $value := . }}
{{- if not (kindIs "invalid" $value) }}
{{ toJson $key }} = {{ include "streamforest.tomlValue" $value }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "streamforest.tomlValue" -}}
{{- if kindIs "map" . -}}
{ {{- $first := true }}{{ range $key, $value := . }}{{ if not (kindIs "invalid" $value) }}{{ if not $first }},{{ end }} {{ toJson $key }} = {{ include "streamforest.tomlValue" $value }}{{ $first = false }}{{ end }}{{ end }} }
{{- else if kindIs "slice" . -}}
[{{ range $i, $value := . }}{{ if $i }}, {{ end }}{{ include "streamforest.tomlValue" $value }}{{ end }}]
{{- else -}}
{{ toJson . }}
{{- end -}}
{{- end }}

{{- define "streamforest.configPath" -}}
{{ .Values.configFile.mountPath }}/streamforest.toml
{{- end }}

{{/* KEDA autoscaling: on when autoscaling.enabled and either KEDA's API is served by the cluster
     (.Capabilities; `helm template --api-versions keda.sh/v1alpha1` offline) or
     autoscaling.keda.enabled is true; autoscaling.keda.enabled false turns it off */}}
{{- define "streamforest.keda" -}}
{{- if .Values.autoscaling.enabled }}
{{- $forced := .Values.autoscaling.keda.enabled }}
{{- if kindIs "bool" $forced }}
{{- if $forced }}true{{ end }}
{{- else if .Capabilities.APIVersions.Has "keda.sh/v1alpha1" }}true{{ end }}
{{- end }}
{{- end }}

{{/* the metrics Service only (not the StatefulSet's governing Service): what a ServiceMonitor selects */}}
{{- define "streamforest.metricsServiceLabels" -}}
app.kubernetes.io/name: {{ include "streamforest.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: metrics
{{- end }}
