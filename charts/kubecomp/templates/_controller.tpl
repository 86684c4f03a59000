{{/*
The Deployment of a leader-elected controller that talks to the API server (kubecomp-sched,
reconfig-mgr). .c: the component's values; .args: its own flags; .component: its name.
*/}}
{{- define "kubecomp.controllerDeployment" -}}
{{- $c := .c -}}
{{- $name := include "kubecomp.name" . -}}
{{- $svc := dict "root" .root "component" .component "port" $c.metricsPort "portName" "metrics" "scheme" "http" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
spec:
  replicas: {{ $c.replicas }}
  selector:
    matchLabels:
      {{- include "kubecomp.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "kubecomp.labels" . | nindent 8 }}
      {{- with include "kubecomp.scrapeAnnotations" $svc }}
      annotations:
        {{- . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ $name }}
      {{- with include "kubecomp.imagePullSecrets" . }}
      {{- . | nindent 6 }}
      {{- end }}
      {{- with .root.Values.global.controllerPriorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- include "kubecomp.restrictedPodSecurity" . | nindent 6 }}
      terminationGracePeriodSeconds: 30
      # Spread the replicas so one node's loss leaves a standby to take the Lease.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "kubecomp.selectorLabels" . | nindent 14 }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "kubecomp.image" (dict "root" .root "image" $c.image) }}
          imagePullPolicy: {{ .root.Values.global.image.pullPolicy }}
          args:
            {{- range .args }}
            - {{ . }}
            {{- end }}
            # The Lease holder identity: the pod's name.
            - --identity=$(POD_NAME)
            - --bind-address=0.0.0.0
            - --port={{ $c.metricsPort }}
            - --log-level={{ .root.Values.global.logLevel }}
            - --log-format={{ .root.Values.global.logFormat }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
          ports:
            - name: metrics
              containerPort: {{ $c.metricsPort }}
              protocol: TCP
          {{- include "kubecomp.probes" $svc | nindent 10 }}
          resources:
            {{- toYaml $c.resources | nindent 12 }}
          {{- include "kubecomp.restrictedContainerSecurity" . | nindent 10 }}
{{- if $c.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
spec:
  minAvailable: {{ $c.podDisruptionBudget.minAvailable }}
  selector:
    matchLabels:
      {{- include "kubecomp.selectorLabels" . | nindent 6 }}
{{- end }}
{{- if .root.Values.global.monitoring.serviceMonitor.enabled }}
---
# Every replica serves metrics (kubecomp_*_leader tells which one leads): scrape the pods.
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ $name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
    {{- with .root.Values.global.monitoring.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "kubecomp.selectorLabels" . | nindent 6 }}
  podMetricsEndpoints:
    - port: metrics
      path: /metrics
      interval: {{ .root.Values.global.monitoring.serviceMonitor.interval }}
{{- end }}
{{- end -}}

{{/* ServiceAccount plus a Role on Leases in the release namespace (leader election: get,
create, update the one Lease, by name once it exists; create cannot be limited by name). */}}
{{- define "kubecomp.leaseAccess" -}}
{{- $name := include "kubecomp.name" . -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}-lease
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ .leaseName }}]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-lease
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}-lease
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/* A ClusterRole with .rules (YAML text) bound to the component's ServiceAccount. */}}
{{- define "kubecomp.clusterAccess" -}}
{{- $name := include "kubecomp.name" . -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}
