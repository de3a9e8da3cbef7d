{{/*
Who registers the webhook configurations: the server (webhooks.registeredBy=server, only
with self-managed certificates, whose CA the server knows) or the chart (every other
mode, and registeredBy=chart).
*/}}
{{- define "trainplace.registeredBy" -}}
{{- if and (eq (include "trainplace.certMode" .) "self-managed") (eq .Values.webhooks.registeredBy "server") -}}
server
{{- else -}}
chart
{{- end -}}
{{- end -}}

{{/*
Refuse to install over another trainplace install (kustomize, the sandbox, another
release): a webhook named *.trainplace.io in a configuration that is neither this
release's (Helm's release annotations) nor registered by this release's server (owned by
its ClusterRole); or the release's ClusterRole or ClusterRoleBinding name held by a
trainplace object (label app.kubernetes.io/part-of) of another install. `lookup` sees the cluster on install and upgrade only (helm template
and --dry-run=client see nothing, so they never fail here).
*/}}
{{- define "trainplace.refuseForeignInstall" -}}
{{- $owner := printf "%s-certificates" (include "trainplace.fullname" .) -}}
{{- range $kind := list "MutatingWebhookConfiguration" "ValidatingWebhookConfiguration" -}}
{{- $all := lookup "admissionregistration.k8s.io/v1" $kind "" "" -}}
{{- range $c := (dig "items" list $all) -}}
{{- $hooks := list -}}
{{- range $w := (dig "webhooks" list $c) -}}
{{- if hasSuffix ".trainplace.io" $w.name -}}
{{- $hooks = append $hooks $w.name -}}
{{- end -}}
{{- end -}}
{{- if $hooks -}}
{{- $annotations := dig "metadata" "annotations" dict $c -}}
{{- $ours := and (eq (get $annotations "meta.helm.sh/release-name") $.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $.Release.Namespace) -}}
{{- range $ref := (dig "metadata" "ownerReferences" list $c) -}}
{{- if and (eq $ref.kind "ClusterRole") (eq $ref.name $owner) -}}
{{- $ours = true -}}
{{- end -}}
{{- end -}}
{{- if not $ours -}}
{{- $by := get (dig "metadata" "labels" dict $c) "app.kubernetes.io/managed-by" | default "unknown" -}}
{{- $release := get $annotations "meta.helm.sh/release-name" -}}
{{- fail (printf `trainplace is already installed in this cluster: %s %q (webhook %s, managed-by %s%s) belongs to another install. Two installs would judge every pod twice, and taking its objects over (--take-ownership) leaves enforcement half-registered when either is removed. Remove that install first (kustomize: kubectl delete -k <overlay>; Helm: helm uninstall), then install; docs/install.md, "Replacing an existing install".` $kind $c.metadata.name (join ", " $hooks) $by (ternary (printf ", Helm release %s/%s" (get $annotations "meta.helm.sh/release-namespace") $release) "" (ne $release ""))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* The release's own cluster-scoped names, held by another trainplace install (a
kustomize install without webhooks, such as the sandbox's): taking them over would
hand them to this release, and its uninstall would delete them. */ -}}
{{- $fullname := include "trainplace.fullname" . -}}
{{- range $kind := list "ClusterRole" "ClusterRoleBinding" -}}
{{- $o := lookup "rbac.authorization.k8s.io/v1" $kind "" $fullname -}}
{{- if $o -}}
{{- $annotations := dig "metadata" "annotations" dict $o -}}
{{- $labels := dig "metadata" "labels" dict $o -}}
{{- $ours := and (eq (get $annotations "meta.helm.sh/release-name") $.Release.Name) (eq (get $annotations "meta.helm.sh/release-namespace") $.Release.Namespace) -}}
{{- if and (not $ours) (eq (get $labels "app.kubernetes.io/part-of") "trainplace") -}}
{{- fail (printf `trainplace is already installed in this cluster: %s %q (managed-by %s) belongs to another install, and --take-ownership would hand it to this release, whose uninstall would then delete it. Remove that install first (kustomize: kubectl delete -k <overlay>; Helm: helm uninstall), or install under another release name; docs/install.md, "Replacing an existing install".` $kind $fullname (get $labels "app.kubernetes.io/managed-by" | default "unknown")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The two webhook configurations. failurePolicy and timeoutSeconds per webhook (values
webhooks.mutate, webhooks.validate): mutate Ignore by default (a pod admitted without the
layout is slower, not broken), validate Fail (a layout that wastes the interconnect is not
admitted unseen).
*/}}
{{- define "trainplace.webhookConfigurations" -}}
{{- $mode := include "trainplace.certMode" . -}}
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ include "trainplace.fullname" . }}
  labels:
    {{- include "trainplace.labels" . | nindent 4 }}
  {{- if eq $mode "cert-manager" }}
  annotations:
    # cainjector copies the CA of the serving Certificate into caBundle.
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "trainplace.fullname" . }}-serving
  {{- end }}
webhooks:
  - name: mutate.trainplace.io
    admissionReviewVersions: ["v1"]
    sideEffects: None
    timeoutSeconds: {{ .Values.webhooks.mutate.timeoutSeconds }}
    failurePolicy: {{ .Values.webhooks.mutate.failurePolicy }}
    # Another mutating webhook (or ours) may change the pod after us: call again.
    reinvocationPolicy: IfNeeded
    matchPolicy: Equivalent
    {{- include "trainplace.clientConfig" (dict "root" . "path" "/mutate" "mode" $mode) | nindent 4 }}
    {{- include "trainplace.namespaceSelector" . | nindent 4 }}
    {{- include "trainplace.webhookRules" . | nindent 4 }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ include "trainplace.fullname" . }}
  labels:
    {{- include "trainplace.labels" . | nindent 4 }}
  {{- if eq $mode "cert-manager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "trainplace.fullname" . }}-serving
  {{- end }}
webhooks:
  - name: validate.trainplace.io
    admissionReviewVersions: ["v1"]
    sideEffects: None
    timeoutSeconds: {{ .Values.webhooks.validate.timeoutSeconds }}
    failurePolicy: {{ .Values.webhooks.validate.failurePolicy }}
    matchPolicy: Equivalent
    {{- include "trainplace.clientConfig" (dict "root" . "path" "/validate" "mode" $mode) | nindent 4 }}
    {{- include "trainplace.namespaceSelector" . | nindent 4 }}
    {{- include "trainplace.webhookRules" . | nindent 4 }}
{{- end -}}

{{/*
What reaches the webhook, the same for mutate and validate: the rules (CREATE of pods;
CREATE and UPDATE of the workload kinds, whose pod templates can change on UPDATE;
DELETE in no rule) and the matchConditions (CEL, evaluated by the API server before it
calls: pods only when a container asks for a device; the workload kinds always pass).
manifests/README.md, "What reaches the webhook", has the reasoning.
*/}}
{{- define "trainplace.webhookRules" -}}
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["pods"]
    scope: Namespaced
  - apiGroups: ["batch"]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["jobs"]
    scope: Namespaced
  # CRD groups: every served version (matchPolicy Equivalent covers conversions).
  - apiGroups: ["jobset.x-k8s.io"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["jobsets"]
    scope: Namespaced
  - apiGroups: ["kubeflow.org"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["pytorchjobs", "mpijobs", "paddlejobs", "tfjobs", "xgboostjobs", "jaxjobs"]
    scope: Namespaced
  # `kubectl scale pytorchjob|paddlejob` (and autoscalers) change the Worker count through the
  # scale subresource, which no rule above covers: judged against the job in the
  # inventory at its new size.
  - apiGroups: ["kubeflow.org"]
    apiVersions: ["*"]
    operations: ["UPDATE"]
    resources: ["pytorchjobs/scale", "paddlejobs/scale"]
    scope: Namespaced
  - apiGroups: ["trainer.kubeflow.org"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["trainjobs", "trainingruntimes"]
    scope: Namespaced
  # ClusterTrainingRuntimes are cluster-scoped (namespaceSelector does not apply):
  # judged when created or updated, so every TrainJob inherits a good layout.
  - apiGroups: ["trainer.kubeflow.org"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["clustertrainingruntimes"]
    scope: Cluster
  - apiGroups: ["ray.io"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["rayclusters", "rayjobs", "rayservices"]
    scope: Namespaced
  - apiGroups: ["batch.volcano.sh"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["jobs"]
    scope: Namespaced
  # SageMaker HyperPod's training operator (plural from the HyperPod SDK:
  # https://github.com/aws/sagemaker-hyperpod-cli/blob/011ca927123e02b35a399935bbb3ab1905fe33c7/src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py).
  - apiGroups: ["sagemaker.amazonaws.com"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["hyperpodpytorchjobs"]
    scope: Namespaced
  - apiGroups: ["leaderworkerset.x-k8s.io"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["leaderworkersets"]
    scope: Namespaced
  # Strict mode also judges the pod templates of the core controllers and DRA claims
  # where they are written (the precise rules pass them); the condition
  # template-requests-device sends only templates that ask for a device.
  - apiGroups: ["apps"]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["deployments", "replicasets", "statefulsets", "daemonsets"]
    scope: Namespaced
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["replicationcontrollers"]
    scope: Namespaced
  - apiGroups: ["batch"]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["cronjobs"]
    scope: Namespaced
  - apiGroups: ["resource.k8s.io"]
    apiVersions: ["*"]
    operations: ["CREATE", "UPDATE"]
    resources: ["resourceclaims", "resourceclaimtemplates"]
    scope: Namespaced
matchConditions:
  # DELETE is in no rule; this keeps it out even if a rule is widened later
  # (`object` is null on DELETE).
  - name: not-delete
    expression: "request.operation != 'DELETE'"
  # A pod UPDATE reaches the webhook only when it changes the pod's labels (a pod's
  # job label must not move it out of its job's zone hold); finalizer, status and
  # annotation writes by controllers and the kubelet never wait on it.
  - name: pod-update-changes-labels
    expression: >-
      request.operation != 'UPDATE' || request.resource.resource != 'pods' ||
      !has(object.metadata.labels) || !has(oldObject.metadata.labels) ||
      object.metadata.labels != oldObject.metadata.labels
  # Anything that is not a core pod passes (the workload kinds of the rules).
  # A pod passes if any container or init container requests or limits a resource
  # other than cpu, memory, ephemeral-storage and hugepages-* (any device: GPUs
  # under any name, MIG slices, Neuron, EFA), or if it has DRA resourceClaims.
  # Only plain CPU pods are kept away; a renamed device resource is not. Sizes are
  # read before any walk: past 64 containers or 32 resource names the pod goes to
  # the webhook (too-large) rather than have the API server walk it.
  - name: pod-requests-accelerator
    expression: >-
      request.resource.group != '' || request.resource.resource != 'pods' ||
      (has(object.spec) && (has(object.spec.resourceClaims) ||
      (has(object.spec.containers) ? size(object.spec.containers) : 0) +
      (has(object.spec.initContainers) ? size(object.spec.initContainers) : 0) > 64 ||
      ((has(object.spec.containers) ? object.spec.containers : []) +
      (has(object.spec.initContainers) ? object.spec.initContainers : [])).exists(c, has(c.resources) &&
      ((has(c.resources.limits) && (size(c.resources.limits) > 32 || c.resources.limits.exists(r,
      !(r in ['cpu', 'memory', 'ephemeral-storage']) && !r.startsWith('hugepages-')))) ||
      (has(c.resources.requests) && (size(c.resources.requests) > 32 || c.resources.requests.exists(r,
      !(r in ['cpu', 'memory', 'ephemeral-storage']) && !r.startsWith('hugepages-'))))))))
  # A core controller's pod template passes only when it asks for a device, as a pod
  # does above (limits, or DRA resourceClaims): their CPU workloads never wait on us.
  - name: template-requests-device
    expression: >-
      !(request.resource.group == 'apps' || request.resource.resource in
      ['replicationcontrollers', 'cronjobs']) ||
      (has(object.spec) && (request.resource.resource == 'cronjobs' ?
      (has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) &&
      has(object.spec.jobTemplate.spec.template) ? [object.spec.jobTemplate.spec.template] : []) :
      (has(object.spec.template) ? [object.spec.template] : [])).exists(t, has(t.spec) &&
      (has(t.spec.resourceClaims) ||
      (has(t.spec.containers) ? size(t.spec.containers) : 0) +
      (has(t.spec.initContainers) ? size(t.spec.initContainers) : 0) > 64 ||
      ((has(t.spec.containers) ? t.spec.containers : []) +
      (has(t.spec.initContainers) ? t.spec.initContainers : [])).exists(c, has(c.resources) &&
      has(c.resources.limits) && (size(c.resources.limits) > 32 || c.resources.limits.exists(r,
      !(r in ['cpu', 'memory', 'ephemeral-storage']) && !r.startsWith('hugepages-')))))))
{{- end -}}

{{/* Never kube-system, kube-node-lease nor the release's namespace; then the values'
(excludeNamespaces, excludeNamespaceLabel, and namespaceSelector's terms added to these);
objectSelector as given. */}}
{{- define "trainplace.namespaceSelector" -}}
namespaceSelector:
  {{- with .Values.webhooks.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ concat (list "kube-system" "kube-node-lease" .Release.Namespace) .Values.webhooks.excludeNamespaces | uniq | toJson }}
    {{- with .Values.webhooks.excludeNamespaceLabel }}
    {{- if .key }}
    - key: {{ .key }}
      operator: NotIn
      values: {{ .values | toJson }}
    {{- end }}
    {{- end }}
    {{- with .Values.webhooks.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- with .Values.webhooks.objectSelector }}
objectSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "trainplace.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "trainplace.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: {{ .root.Values.service.port }}
  {{- if eq .mode "provided" }}
  caBundle: {{ .root.Values.certificates.provided.caBundle | b64enc }}
  {{- end }}
{{- end -}}
