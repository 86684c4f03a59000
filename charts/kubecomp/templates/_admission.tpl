{{/*
A ValidatingAdmissionPolicy and its binding that narrow a daemon's `patch` of pods or nodes
(RBAC grants it on every object of the kind) to its own keys (global.admissionPolicies;
docs/deploy.md, section 5). It applies only to requests of the component's ServiceAccount and
only to UPDATE (a patch is one) of the object itself: pods/status, pods/binding and the other
subresources are not matched. Such a request is admitted only if everything but the listed
annotation and label keys is as it was: spec, ownerReferences, finalizers, every other label
and annotation (the API server itself resets status and managedFields, which are not compared).
.component: the daemon; .resource: pods or nodes; .annotations, .labels: its own keys;
.ownNode: also require the object (a Node, or a pod's spec.nodeName) to be the node the
caller's bound token names (extra authentication.kubernetes.io/node-name, Kubernetes >= 1.30).
*/}}
{{- define "kubecomp.ownKeysPolicy" -}}
{{- $name := printf "%s-%s" (include "kubecomp.name" .) .resource -}}
{{- $user := printf "system:serviceaccount:%s:%s" .root.Release.Namespace (include "kubecomp.name" .) -}}
{{- $ann := list -}}
{{- range .annotations }}{{ $ann = append $ann (squote .) }}{{ end -}}
{{- $lab := list -}}
{{- range .labels }}{{ $lab = append $lab (squote .) }}{{ end -}}
{{- $nodeKey := "'authentication.kubernetes.io/node-name'" -}}
{{- $nodeOf := ternary "object.metadata.name" "object.spec.nodeName" (eq .resource "nodes") }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $name }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["*"]
        operations: [UPDATE]
        resources: [{{ .resource }}]
  matchConditions:
    - name: {{ .component }}
      expression: {{ printf "request.userInfo.username == '%s'" $user | quote }}
  variables:
    - name: ownAnnotations
      expression: {{ printf "[%s]" (join ", " $ann) | quote }}
    - name: ownLabels
      expression: {{ printf "[%s]" (join ", " $lab) | quote }}
    # The other keys, now and before.
    {{- range $field := list "annotations" "labels" }}
    {{- $own := ternary "variables.ownAnnotations" "variables.ownLabels" (eq $field "annotations") }}
    {{- range $var, $obj := dict "Now" "object" "Before" "oldObject" }}
    - name: {{ $field }}{{ $var }}
      expression: {{ printf "has(%s.metadata.%s) ? %s.metadata.%s.filter(k, !(k in %s)) : []" $obj $field $obj $field $own | quote }}
    {{- end }}
    {{- end }}
  validations:
    {{- if .ownNode }}
    - expression: >-
        has(request.userInfo.extra) && {{ $nodeKey }} in request.userInfo.extra &&
        {{ if eq .resource "pods" }}has(object.spec.nodeName) && {{ end }}{{ $nodeOf }} in request.userInfo.extra[{{ $nodeKey }}]
      message: {{ printf "%s may change only %s (the node its ServiceAccount token is bound to)" .component (ternary "its own Node" "pods on its own node" (eq .resource "nodes")) | quote }}
    {{- end }}
    - expression: >-
        has(object.spec) == has(oldObject.spec) && (!has(object.spec) || object.spec == oldObject.spec)
      message: {{ printf "%s may not change the spec of %s" .component (ternary "a Node" "a pod" (eq .resource "nodes")) | quote }}
    {{- range $field := list "ownerReferences" "finalizers" }}
    - expression: >-
        has(object.metadata.{{ $field }}) == has(oldObject.metadata.{{ $field }}) &&
        (!has(object.metadata.{{ $field }}) || object.metadata.{{ $field }} == oldObject.metadata.{{ $field }})
      message: {{ printf "%s may not change metadata.%s of %s" $.component $field (ternary "a Node" "a pod" (eq $.resource "nodes")) | quote }}
    {{- end }}
    {{- range $field, $keys := dict "annotations" .annotations "labels" .labels }}
    - expression: >-
        variables.{{ $field }}Now.all(k, k in variables.{{ $field }}Before &&
        object.metadata.{{ $field }}[k] == oldObject.metadata.{{ $field }}[k]) &&
        variables.{{ $field }}Before.all(k, k in variables.{{ $field }}Now)
      {{- $of := ternary "a Node" "a pod" (eq $.resource "nodes") }}
      message: {{ ternary (printf "%s may change no %s of %s" $.component (trimSuffix "s" $field) $of) (printf "%s may change only these %s of %s: %s" $.component $field $of (join ", " $keys)) (empty $keys) | quote }}
    {{- end }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "kubecomp.labels" . | nindent 4 }}
spec:
  policyName: {{ $name }}
  validationActions: [Deny]
{{- end -}}
