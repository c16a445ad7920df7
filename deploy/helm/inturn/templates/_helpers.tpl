{{/*
Names, labels, image, settings-as-environment and the checks that fail rendering.
Templates that take a component are called with (dict "ctx" $ "component" "worker").
*/}}

{{- define "inturn.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release + chart name, cut to 63 characters (a DNS label); the release name alone when it holds the chart name. */}}
{{- define "inturn.fullname" -}}
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

{{/* A component's resource name: fullname cut so that "-<component>" still fits in 63 characters. */}}
{{- define "inturn.componentName" -}}
{{- $full := include "inturn.fullname" .ctx }}
{{- printf "%s-%s" ($full | trunc (int (sub 62 (len .component))) | trimSuffix "-") .component }}
{{- end }}

{{/* CronJob names get an 11-character suffix per Job, so Kubernetes caps them at 52 characters. */}}
{{- define "inturn.reportCronJobName" -}}
{{- printf "%s-report" (include "inturn.fullname" . | trunc 45 | trimSuffix "-") }}
{{- end }}

{{- define "inturn.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "inturn.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inturn.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end }}

{{- define "inturn.labels" -}}
helm.sh/chart: {{ include "inturn.chart" .ctx }}
{{ include "inturn.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: inturn
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "inturn.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- /* The report's image: the service image's repository with "-report" unless report.image says otherwise. */}}
{{- define "inturn.reportImage" -}}
{{- $img := .Values.report.image }}
{{- $repo := default (printf "%s-report" .Values.image.repository) $img.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) $img.tag }}
{{- if $img.digest }}
{{- printf "%s@%s" $repo $img.digest }}
{{- else }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}
{{- end }}

{{- define "inturn.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "inturn.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "inturn.reportServiceAccountName" -}}
{{- if .Values.report.serviceAccount.create }}
{{- default (include "inturn.componentName" (dict "ctx" . "component" "report")) .Values.report.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.report.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the items refer to unless an item names its own. */}}
{{- define "inturn.secretName" -}}
{{- default (include "inturn.componentName" (dict "ctx" . "component" "secrets")) .Values.secrets.existingSecret }}
{{- end }}

{{/* One settings value as an environment string: maps and lists as JSON, whole numbers without an exponent. */}}
{{- define "inturn.envValue" -}}
{{- $v := . }}
{{- if or (kindIs "map" $v) (kindIs "slice" $v) }}
{{- toJson $v }}
{{- else if and (kindIs "float64" $v) (eq $v (floor $v)) }}
{{- int64 $v | toString }}
{{- else }}
{{- toString $v }}
{{- end }}
{{- end }}

{{/*
The settings (field name -> value) one component reads, before they become INTURN_* variables: the shared
`config`, the topic layout, the component's own `config` and the ports the chart wires into probes and Services.
*/}}
{{- define "inturn.settings" -}}
{{- $v := .ctx.Values }}
{{- $s := deepCopy $v.config }}
{{- $_ := set $s "topic_partitions" $v.topics.partitions }}
{{- $_ := set $s "topic_replication" $v.topics.replication }}
{{- $_ := set $s "topic_retention_ms" $v.topics.retentionMs }}
{{- if eq .component "worker" }}
{{- $s = merge (dict "worker_http_port" $v.worker.port) (deepCopy $v.worker.config) $s }}
{{- else if eq .component "webhook" }}
{{- $s = merge (dict "webhook_port" $v.webhook.port "webhook_internal_port" $v.webhook.internalPort) (deepCopy $v.webhook.config) $s }}
{{- else if eq .component "bridge" }}
{{- $s = merge (dict "bridge_mode" $v.bridge.mode "bridge_http_port" $v.bridge.port "bridge_internal_port" $v.bridge.internalPort "bridge_push_allow_unauthenticated" $v.bridge.push.allowUnauthenticated) (deepCopy $v.bridge.config) $s }}
{{- else if eq .component "report" }}
{{- $s3 := $v.report.output.s3 | default dict }}
{{- $storage := dict "report_out_dir" (default $v.report.output.mountPath $v.report.output.uri) }}
{{- with $s3.endpoint }}{{- $_ := set $storage "report_s3_endpoint" . }}{{- end }}
{{- with $s3.region }}{{- $_ := set $storage "report_s3_region" . }}{{- end }}
{{- if $s3.pathStyle }}{{- $_ := set $storage "report_s3_path_style" true }}{{- end }}
{{- $s = merge $storage (deepCopy $v.report.config) $s }}
{{- end }}
{{- toYaml $s }}
{{- end }}

{{/* The same settings as INTURN_* name -> string, the data of the component's ConfigMap. */}}
{{- define "inturn.configData" -}}
{{- $settings := include "inturn.settings" . | fromYaml }}
{{- range $field := keys $settings | sortAlpha }}
{{ printf "INTURN_%s" (upper $field) }}: {{ include "inturn.envValue" (get $settings $field) | quote }}
{{- end }}
{{- end }}

{{/* checksum/config: changes whenever the component's settings change, so its pods roll. */}}
{{- define "inturn.configChecksum" -}}
{{- include "inturn.configData" . | sha256sum }}
{{- end }}

{{/* checksum/secret: only for a chart-created Secret (the chart cannot see an existing one's data). */}}
{{- define "inturn.secretChecksum" -}}
{{- if and .Values.secrets.create (not .Values.secrets.existingSecret) }}
{{- toJson .Values.secrets.values | sha256sum }}
{{- end }}
{{- end }}

{{/* env entries for the secrets a component gets: valueFrom.secretKeyRef only, never a literal value. */}}
{{- define "inturn.secretEnv" -}}
{{- $ctx := .ctx }}
{{- $component := .component }}
{{- range $name := keys $ctx.Values.secrets.items | sortAlpha }}
{{- $item := get $ctx.Values.secrets.items $name }}
{{- if has $component $item.components }}
- name: {{ printf "INTURN_%s" (upper $item.field) }}
  valueFrom:
    secretKeyRef:
      name: {{ default (include "inturn.secretName" $ctx) $item.existingSecret }}
      key: {{ $item.key }}
      optional: {{ $item.optional }}
{{- end }}
{{- end }}
{{- if $ctx.Values.kafkaClientConfig.existingSecret }}
- name: INTURN_KAFKA_CLIENT_CONFIG
  valueFrom:
    secretKeyRef:
      name: {{ $ctx.Values.kafkaClientConfig.existingSecret }}
      key: {{ $ctx.Values.kafkaClientConfig.key }}
{{- end }}
{{- end }}

{{- define "inturn.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{- define "inturn.securityContext" -}}
{{- toYaml .Values.securityContext }}
{{- end }}

{{/* The writable /tmp every container gets (the root filesystem is read-only). */}}
{{- define "inturn.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end }}

{{- define "inturn.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* The namespace of the report's resources: report.namespace, or the release's. */}}
{{- define "inturn.reportNamespace" -}}
{{- default .Release.Namespace .Values.report.namespace }}
{{- end }}

{{/* The claim the report writes to: the existing one, or "<fullname>-report" which the chart creates. */}}
{{- define "inturn.reportClaimName" -}}
{{- default (include "inturn.componentName" (dict "ctx" . "component" "report")) .Values.report.output.existingClaim }}
{{- end }}

{{/* The report's output volume source (when output.uri is empty): a claim, never an emptyDir. */}}
{{- define "inturn.reportOutputVolume" -}}
persistentVolumeClaim:
  claimName: {{ include "inturn.reportClaimName" . }}
{{- end }}

{{- define "inturn.topologySpread" -}}
{{- if .ctx.Values.topologySpread.enabled }}
topologySpreadConstraints:
{{- range .ctx.Values.topologySpread.topologyKeys }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $.ctx.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "inturn.selectorLabels" $ | nindent 8 }}
    # Spread each ReplicaSet on its own, so a rolling update does not count the old pods.
    matchLabelKeys: [pod-template-hash]
{{- end }}
{{- end }}
{{- end }}

{{/* Checks that fail rendering with a message saying what to change. */}}
{{- define "inturn.validate" -}}
{{- $v := .Values }}
{{- $partitions := int $v.topics.partitions }}
{{- if $v.worker.enabled }}
{{- if gt (int $v.worker.replicas) $partitions }}
{{- fail (printf "worker.replicas (%d) exceeds topics.partitions (%d): a consumer group gives each partition to one member, so the extra workers would idle. Lower worker.replicas or add partitions (and set topics.partitions)." (int $v.worker.replicas) $partitions) }}
{{- end }}
{{- if and $v.worker.hpa.enabled (gt (int $v.worker.hpa.maxReplicas) $partitions) }}
{{- fail (printf "worker.hpa.maxReplicas (%d) exceeds topics.partitions (%d)." (int $v.worker.hpa.maxReplicas) $partitions) }}
{{- end }}
{{- if and $v.worker.keda.enabled (gt (int $v.worker.keda.maxReplicas) $partitions) }}
{{- fail (printf "worker.keda.maxReplicas (%d) exceeds topics.partitions (%d)." (int $v.worker.keda.maxReplicas) $partitions) }}
{{- end }}
{{- if and $v.worker.hpa.enabled $v.worker.keda.enabled }}
{{- fail "worker.hpa and worker.keda are both enabled; they would fight over the worker's replicas: enable one." }}
{{- end }}
{{- end }}
{{- $secretFields := list "kafka_client_config" "report_jdbc_password" }}
{{- range $item := $v.secrets.items }}
{{- $secretFields = append $secretFields $item.field }}
{{- end }}
{{- range $where, $config := dict "config" $v.config "worker.config" $v.worker.config "webhook.config" $v.webhook.config "bridge.config" $v.bridge.config "report.config" $v.report.config }}
{{- range $field, $_ := $config }}
{{- if has $field $secretFields }}
{{- fail (printf "%s.%s is a secret: it must come from a Secret (secrets.items / kafkaClientConfig), never from a ConfigMap." $where $field) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $v.report.enabled (eq $v.report.spark.deployMode "cluster") $v.report.spark.master (not (hasPrefix "k8s://" $v.report.spark.master)) }}
{{- fail "report.spark.deployMode=cluster needs Spark on Kubernetes (report.spark.master empty or k8s://...): other masters run Python applications in client mode only." }}
{{- end }}
{{- $managed := dict "topic_partitions" "topics.partitions" "topic_replication" "topics.replication" "topic_retention_ms" "topics.retentionMs" "worker_http_port" "worker.port" "webhook_port" "webhook.port" "webhook_internal_port" "webhook.internalPort" "bridge_http_port" "bridge.port" "bridge_internal_port" "bridge.internalPort" "bridge_mode" "bridge.mode" "bridge_push_allow_unauthenticated" "bridge.push.allowUnauthenticated" "report_out_dir" "report.output" "worker_instance_id" "worker.staticMembership" }}
{{- range $where, $config := dict "config" $v.config "worker.config" $v.worker.config "webhook.config" $v.webhook.config "bridge.config" $v.bridge.config "report.config" $v.report.config }}
{{- range $field, $_ := $config }}
{{- if hasKey $managed $field }}
{{- fail (printf "%s.%s is set by the chart from %s (probes, Services and hooks use it too): set that instead." $where $field (get $managed $field)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $v.bridge.enabled (eq $v.bridge.mode "push") (not $v.bridge.push.allowUnauthenticated) }}
{{- if not (and $v.bridge.config.bridge_oidc_audience $v.bridge.config.bridge_oidc_email) }}
{{- fail "bridge.mode=push needs bridge.config.bridge_oidc_audience and bridge.config.bridge_oidc_email (the audience your push subscription signs its OIDC tokens for, and its service account's email): without both, anyone who reaches the push endpoint makes the workers message anyone. On a private network only, bridge.push.allowUnauthenticated=true accepts unsigned pushes." }}
{{- end }}
{{- end }}
{{- include "inturn.validateConfigKeys" . }}
{{- include "inturn.validateDrain" . }}
{{- if and $v.secrets.create $v.secrets.existingSecret }}
{{- fail "secrets.create and secrets.existingSecret are both set: the chart creates a Secret only when you name none." }}
{{- end }}
{{- end }}

{{/*
Every key of a `config` map must be a setting of the component it feeds: a misspelt one would otherwise be ignored
and the default used. values.schema.json types the known keys but lets others through, so that this check can name
the closest known key, which helm's schema error cannot. The known keys come from files/settings.json (written by
`python -m inturn_devtools.chart_schema`). Closeness: the Dice coefficient over character bigrams, in thousandths
(2 x the unknown key's bigrams found in the candidate / both keys' bigram counts); below 600 nothing is suggested.
Secrets and chart-set keys are refused earlier with their own messages.
*/}}
{{- define "inturn.validateConfigKeys" -}}
{{- $v := .Values }}
{{- $known := .Files.Get "files/settings.json" | fromJson }}
{{- $owners := dict "config" "every component" "worker.config" "the worker" "webhook.config" "the webhook" "bridge.config" "the bridge" "report.config" "the report" }}
{{- range $where, $config := dict "config" $v.config "worker.config" $v.worker.config "webhook.config" $v.webhook.config "bridge.config" $v.bridge.config "report.config" $v.report.config }}
{{- $keys := get $known $where }}
{{- range $field, $_ := $config }}
{{- if not (has $field $keys) }}
{{- $best := "" }}
{{- $bestScore := 0 }}
{{- $n := len $field }}
{{- range $candidate := $keys }}
{{- $matches := 0 }}
{{- range $i := until (max 0 (sub $n 1) | int) }}
{{- if contains (substr $i (add $i 2 | int) $field) $candidate }}{{ $matches = add1 $matches }}{{ end }}
{{- end }}
{{- $score := div (mul $matches 2000) (max 1 (sub (add $n (len $candidate)) 2)) }}
{{- if gt $score $bestScore }}{{ $bestScore = $score }}{{ $best = $candidate }}{{ end }}
{{- end }}
{{- if ge $bestScore 600 }}
{{- include "inturn.failLint" (printf "%s.%s is not a setting of %s (did you mean %s?)" $where $field (get $owners $where) $best) }}
{{- else }}
{{- include "inturn.failLint" (printf "%s.%s is not a setting of %s; values.schema.json lists its settings (%s.properties)." $where $field (get $owners $where) $where) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
fail with the message given, in `helm lint` too: lint turns `fail` into an [INFO] line and renders on, so the line
after it (reached only by lint) errors with the same message: the include of a template that does not exist.
*/}}
{{- define "inturn.failLint" -}}
{{- fail . }}
{{- include (printf "values refused: %s" .) nil }}
{{- end }}

{{/*
A drain must finish within the grace period, or Kubernetes kills the pod mid-drain (in-flight messages sent twice,
confirmations lost). Seconds: the preStop sleep plus the component's drain setting must stay below
terminationGracePeriodSeconds.
*/}}
{{- define "inturn.validateDrain" -}}
{{- $v := .Values }}
{{- $checks := list }}
{{- if $v.worker.enabled }}
{{- $checks = append $checks (dict "where" "worker" "setting" "worker.config.worker_revoke_grace_ms" "ms" (get $v.worker.config "worker_revoke_grace_ms") "c" $v.worker) }}
{{- end }}
{{- if $v.webhook.enabled }}
{{- $checks = append $checks (dict "where" "webhook" "setting" "" "ms" nil "c" $v.webhook) }}
{{- end }}
{{- if $v.bridge.enabled }}
{{- $s := get $v.bridge.config "bridge_shutdown_timeout_s" }}
{{- $checks = append $checks (dict "where" "bridge" "setting" "bridge.config.bridge_shutdown_timeout_s" "ms" (ternary nil (mulf (default 0 $s) 1000) (kindIs "invalid" $s)) "c" $v.bridge) }}
{{- end }}
{{- range $check := $checks }}
{{- $grace := float64 $check.c.terminationGracePeriodSeconds }}
{{- $sleep := float64 (default 0 $check.c.preStopSleepSeconds) }}
{{- $drain := 0.0 }}
{{- if not (kindIs "invalid" $check.ms) }}{{ $drain = divf $check.ms 1000 }}{{ end }}
{{- if ge (addf $sleep $drain) $grace }}
{{- if $check.setting }}
{{- fail (printf "%s: the drain (%s = %v s, plus preStopSleepSeconds = %v s) does not finish within %s.terminationGracePeriodSeconds (%v s): Kubernetes would kill the pod mid-drain. Raise terminationGracePeriodSeconds above %v or shorten the drain." $check.where $check.setting $drain $sleep $check.where $grace (addf $sleep $drain)) }}
{{- else }}
{{- fail (printf "%s: preStopSleepSeconds (%v s) does not finish within terminationGracePeriodSeconds (%v s): the pod would be killed before it stops serving. Raise terminationGracePeriodSeconds or shorten the sleep." $check.where $sleep $grace) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
