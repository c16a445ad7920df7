{{/*
The Deployment, Service, PodDisruptionBudget and HPA shared by the long-running components (worker, webhook,
bridge): one image, a subcommand, one HTTP port serving /metrics, /healthz and /readyz.
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
  serviceName: {{ $name }}
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
      containers:
        - name: {{ .component }}
          image: {{ include "inturn.image" $ctx }}
          imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
          command: [inturn]
          args:
            {{- toYaml .args | nindent 12 }}
          ports:
            - name: http
              containerPort: {{ $c.port }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ $name }}
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
      volumes:
        {{- include "inturn.tmpVolume" $ctx | nindent 8 }}
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
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "inturn.labels" . | nindent 4 }}
data:
  {{- include "inturn.configData" . | nindent 2 }}
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
    - name: http
      port: {{ if hasKey $c "service" }}{{ $c.service.port }}{{ else }}{{ $c.port }}{{ end }}
      targetPort: http
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
