{{/* Shared pieces of the kubecomp chart's templates. */}}

{{/* Resource name of a component: <release>-<component> (just <component> when it already
starts with the release name, e.g. kubecomp-sched), cut to 63 characters. */}}
{{- define "kubecomp.name" -}}
{{- if hasPrefix (printf "%s-" .root.Release.Name) .component -}}
{{- .component | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .root.Release.Name .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object; selectorLabels are the immutable subset used by selectors. */}}
{{- define "kubecomp.selectorLabels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "kubecomp.labels" -}}
{{ include "kubecomp.selectorLabels" . }}
app.kubernetes.io/part-of: kubecomp
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* <registry>/<image>:<tag>; .image is the component's image name. */}}
{{- define "kubecomp.image" -}}
{{- $g := .root.Values.global.image -}}
{{- printf "%s/%s:%s" $g.registry .image (default .root.Chart.AppVersion $g.tag) -}}
{{- end -}}

{{/* imagePullSecrets of every pod ("" when none). */}}
{{- define "kubecomp.imagePullSecrets" -}}
{{- with .root.Values.global.imagePullSecrets -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* Pod security for daemons that need nothing from the host: non-root, no privilege. */}}
{{- define "kubecomp.restrictedPodSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "kubecomp.restrictedContainerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* Pod annotations for Prometheus' kubernetes_sd scrape config. .scheme: http or https. */}}
{{- define "kubecomp.scrapeAnnotations" -}}
{{- if .root.Values.global.monitoring.scrapeAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
prometheus.io/scheme: {{ .scheme }}
{{- end -}}
{{- end -}}

{{/* livez/readyz probes on the named port. */}}
{{- define "kubecomp.probes" -}}
livenessProbe:
  httpGet:
    path: /livez
    port: {{ .portName }}
    scheme: {{ .scheme | upper }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .portName }}
    scheme: {{ .scheme | upper }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
startupProbe:
  httpGet:
    path: /livez
    port: {{ .portName }}
    scheme: {{ .scheme | upper }}
  periodSeconds: 2
  failureThreshold: 30
{{- end -}}

{{/* The in-cluster URL Metacontroller calls: https://<svc>.<ns>.svc:<port>/<hook>. */}}
{{- define "kubecomp.hookUrl" -}}
{{- printf "%s://%s.%s.svc:%v/%s" (ternary "https" "http" .tls) .service .root.Release.Namespace .port .hook -}}
{{- end -}}

{{/* cert-manager Certificate for a webhook's Secret, with the Service's DNS names. */}}
{{- define "kubecomp.certificate" -}}
{{- $cm := .root.Values.global.certManager -}}
{{- if and .tls $cm.enabled }}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ .service }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
spec:
  secretName: {{ .secretName }}
  duration: {{ $cm.duration }}
  renewBefore: {{ $cm.renewBefore }}
  privateKey:
    algorithm: ECDSA
    size: 256
    rotationPolicy: Always
  dnsNames:
    - {{ .service }}
    - {{ .service }}.{{ .root.Release.Namespace }}
    - {{ .service }}.{{ .root.Release.Namespace }}.svc
    - {{ .service }}.{{ .root.Release.Namespace }}.svc.cluster.local
  issuerRef:
    {{- toYaml $cm.issuerRef | nindent 4 }}
{{- end }}
{{- end -}}

{{/* ServiceMonitor for a component's Service. */}}
{{- define "kubecomp.serviceMonitor" -}}
{{- $sm := .root.Values.global.monitoring.serviceMonitor -}}
{{- if $sm.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .service }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "kubecomp.selectorLabels" . | nindent 6 }}
  endpoints:
    - port: {{ .portName }}
      path: /metrics
      interval: {{ $sm.interval }}
      scheme: {{ .scheme }}
      {{- if eq .scheme "https" }}
      tlsConfig:
        serverName: {{ .service }}.{{ .root.Release.Namespace }}.svc
        ca:
          secret:
            name: {{ .secretName }}
            key: ca.crt
      {{- end }}
{{- end }}
{{- end -}}

{{/* A selector map: its YAML nested at `indent`, or " {}" on the key's line when empty. */}}
{{- define "kubecomp.selector" -}}
{{- if .selector }}{{ toYaml .selector | nindent .indent }}{{ else }} {}{{ end -}}
{{- end -}}

{{/* NetworkPolicy in front of a webhook (global.networkPolicy): Metacontroller sends no
credential with its hook calls, so this is the gate. Ingress to the hook port (which also
serves /metrics) from Metacontroller's pods and from the metrics scraper only. */}}
{{- define "kubecomp.webhookNetworkPolicy" -}}
{{- $np := .root.Values.global.networkPolicy -}}
{{- $mc := .root.Values.metacontroller -}}
{{- if $np.enabled }}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ .service }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "kubecomp.selectorLabels" . | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
    # Metacontroller, calling the hooks.
    - from:
        - namespaceSelector:
            matchLabels:
              kubernetes.io/metadata.name: {{ required "metacontroller.rbac.namespace" $mc.rbac.namespace }}
          podSelector:
            {{- include "kubecomp.selector" (dict "selector" $mc.podSelector "indent" 12) }}
      ports:
        - port: {{ .port }}
          protocol: TCP
    # The metrics scraper, reading /metrics on the same port.
    - from:
        - namespaceSelector:
            {{- include "kubecomp.selector" (dict "selector" $np.metricsScraper.namespaceSelector "indent" 12) }}
          podSelector:
            {{- include "kubecomp.selector" (dict "selector" $np.metricsScraper.podSelector "indent" 12) }}
      ports:
        - port: {{ .port }}
          protocol: TCP
{{- end }}
{{- end -}}
