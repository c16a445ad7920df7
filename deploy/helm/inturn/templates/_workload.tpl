{{/*
The Deployment, Service, PodDisruptionBudget and HPA shared by the long-running components (worker, webhook,
bridge): one image, a subcommand, an internal port (`internal`: /metrics, /healthz, /readyz, and the worker's room
API) and, for the webhook and the bridge in push mode, a public port (`http`: only the callback or push routes, the
one the Ingress routes).
Called with (dict "ctx" $ "component" "worker" "args" (list "worker")); with "statefulset" true the workload is a
StatefulSet whose pods pass their stable name as INTURN_WORKER_INSTANCE_ID (Kafka static group membership).
*/}}
{{- define "inturn.workloadKind" -}}
{{- if .statefulset }}StatefulSet{{ else }}Deployment{{ end }}
{{- end }}
{{- define "inturn.deployment" -}}
{{- $ctx := .ctx }}
{{- $c := get $ctx.Values .component }}
{{- $name := include "inturn.componentName" . }}
apiVersion: apps/v1
kind: {{ include "inturn.workloadKind" . }}
metadata:
  name: {{ $name }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
spec:
  {{- if not (or $c.hpa.enabled (and (hasKey $c "keda") $c.keda.enabled)) }}
  replicas: {{ $c.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "inturn.selectorLabels" . | nindent 6 }}
  {{- if .statefulset }}
  # Stable pod names (<name>-0, -1, ...) are the members' group.instance.id: a restarted pod takes its partitions
  # back without a rebalance. Pods start and stop in parallel; an update replaces one pod at a time.
  serviceName: {{ include "inturn.componentName" (dict "ctx" $ctx "component" (printf "%s-headless" .component)) }}
  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
  {{- else }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  {{- end }}
  template:
    metadata:
      labels:
        {{- include "inturn.labels" . | nindent 8 }}
        {{- with $c.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include "inturn.configChecksum" . }}
        {{- with include "inturn.secretChecksum" $ctx }}
        checksum/secret: {{ . }}
        {{- end }}
        {{- with $c.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "inturn.serviceAccountName" $ctx }}
      automountServiceAccountToken: {{ $ctx.Values.serviceAccount.automountToken }}
      # No service-link variables (INTURN_WEBHOOK_PORT=tcp://...): they would be read as settings.
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ $c.terminationGracePeriodSeconds }}
      securityContext:
        {{- include "inturn.podSecurityContext" $ctx | nindent 8 }}
      {{- with $ctx.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- include "inturn.topologySpread" . | nindent 6 }}
      {{- with $c.initContainers }}
      initContainers:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "inturn.image" $ctx }}
          imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
          command: [inturn]
          args:
            {{- toYaml .args | nindent 12 }}
          ports:
            {{- if include "inturn.publicPort" . }}
            - name: http
              containerPort: {{ $c.port }}
              protocol: TCP
            {{- end }}
            - name: internal
              containerPort: {{ include "inturn.internalPort" . }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ $name }}
            {{- with $c.extraEnvFrom }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- $env := include "inturn.secretEnv" . | trim }}
          {{- if or $env $c.extraEnv .statefulset }}
          env:
            {{- if .statefulset }}
            - name: INTURN_WORKER_INSTANCE_ID
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- end }}
            {{- with $env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $c.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          {{- if gt (int (default 0 $c.preStopSleepSeconds)) 0 }}
          lifecycle:
            preStop:
              exec:
                command: [sleep, {{ int $c.preStopSleepSeconds | quote }}]
          {{- end }}
          livenessProbe:
            {{- toYaml $c.livenessProbe | nindent 12 }}
          readinessProbe:
            {{- toYaml $c.readinessProbe | nindent 12 }}
          startupProbe:
            {{- toYaml $c.startupProbe | nindent 12 }}
          resources:
            {{- toYaml $c.resources | nindent 12 }}
          securityContext:
            {{- include "inturn.securityContext" $ctx | nindent 12 }}
          volumeMounts:
            {{- include "inturn.tmpMount" $ctx | nindent 12 }}
            {{- with $c.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
        {{- with $c.sidecars }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      volumes:
        {{- include "inturn.tmpVolume" $ctx | nindent 8 }}
        {{- with $c.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{- define "inturn.configMap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "inturn.componentName" . }}
  namespace: {{ default .ctx.Release.Namespace .namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
data:
  {{- include "inturn.configData" . | nindent 2 }}
{{- end }}

{{/* The internal port's number: the worker's one port, the webhook's and bridge's internalPort. */}}
{{- define "inturn.internalPort" -}}
{{- $c := get .ctx.Values .component }}
{{- if hasKey $c "internalPort" }}{{ $c.internalPort }}{{ else }}{{ $c.port }}{{ end }}
{{- end }}

{{/* "true" when the component has a public port: the webhook always, the bridge in push mode. */}}
{{- define "inturn.publicPort" -}}
{{- if or (eq .component "webhook") (and (eq .component "bridge") (eq .ctx.Values.bridge.mode "push")) }}true{{ end }}
{{- end }}

{{/*
The worker StatefulSet's governing Service: headless, so each pod has a DNS name
(<pod>.<fullname>-worker-headless.<namespace>.svc), published before it is ready (`inturn rooms show --worker`
reaches a pod that is still starting). Labelled so that the ServiceMonitor does not scrape it a second time.
*/}}
{{- define "inturn.headlessService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "inturn.componentName" (dict "ctx" .ctx "component" (printf "%s-headless" .component)) }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
    inturn.dev/headless: "true"
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    {{- include "inturn.selectorLabels" . | nindent 4 }}
  ports:
    - name: internal
      port: {{ include "inturn.internalPort" . }}
      targetPort: internal
      protocol: TCP
{{- end }}

{{- define "inturn.service" -}}
{{- $c := get .ctx.Values .component }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "inturn.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
  {{- with (and (hasKey $c "service") $c.service.annotations) }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ if hasKey $c "service" }}{{ $c.service.type }}{{ else }}ClusterIP{{ end }}
  selector:
    {{- include "inturn.selectorLabels" . | nindent 4 }}
  ports:
    {{- if include "inturn.publicPort" . }}
    - name: http
      port: {{ $c.service.port }}
      targetPort: http
      protocol: TCP
    {{- end }}
    - name: internal
      port: {{ include "inturn.internalPort" . }}
      targetPort: internal
      protocol: TCP
{{- end }}

{{- define "inturn.pdb" -}}
{{- $c := get .ctx.Values .component }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "inturn.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
spec:
  {{- if hasKey $c.pdb "minAvailable" }}
  minAvailable: {{ $c.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $c.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "inturn.selectorLabels" . | nindent 6 }}
{{- end }}

{{- define "inturn.hpa" -}}
{{- $c := get .ctx.Values .component }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "inturn.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {{ include "inturn.workloadKind" . }}
    name: {{ include "inturn.componentName" . }}
  minReplicas: {{ $c.hpa.minReplicas }}
  maxReplicas: {{ $c.hpa.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $c.hpa.targetCPUUtilizationPercentage }}
  behavior:
    scaleDown:
      # Scale down one pod at a time, slowly: for the worker each removal is a consumer-group rebalance.
      stabilizationWindowSeconds: 300
      policies:
        - type: Pods
          value: 1
          periodSeconds: 120
{{- end }}
