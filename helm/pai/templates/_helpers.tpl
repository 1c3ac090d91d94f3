{{/* Names and labels. */}}
{{- define "pai.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pai.fullname" -}}
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

{{- define "pai.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pai.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pai.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pai
{{- end }}

{{- define "pai.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pai.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pai.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "pai.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "pai.fullname" .) }}
{{- end }}

{{/* Host names Django accepts: probes come as localhost, users through the ingress. */}}
{{- define "pai.allowedHosts" -}}
{{- $hosts := list "localhost" }}
{{- range .Values.config.allowedHosts }}{{ $hosts = append $hosts . }}{{ end }}
{{- if .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}{{ $hosts = append $hosts .host }}{{ end }}
{{- end }}
{{- $hosts | uniq | join "," }}
{{- end }}

{{/* The ConfigMap's data, shared by the release's ConfigMap and the migration hook's copy. */}}
{{- define "pai.configData" -}}
PAI_ENV: production
PAI_BACKEND: kubernetes
PAI_AUTH_MODE: {{ .Values.config.authMode | quote }}
ALLOWED_HOSTS: {{ include "pai.allowedHosts" . | quote }}
LOG_LEVEL: {{ .Values.config.logLevel | quote }}
TIME_ZONE: {{ .Values.config.timeZone | quote }}
SECURE_SSL_REDIRECT: {{ .Values.config.secureSslRedirect | quote }}
PAI_DATA_DIR: /tmp/pai
Q_WORKERS: {{ .Values.worker.processes | quote }}
PAI_KUBE_DEDICATED_TAINT: {{ .Values.config.gpuNodes.dedicatedTaint | quote }}
PAI_KUBE_SKU_LABEL: {{ .Values.config.gpuNodes.skuLabel | quote }}
PAI_KUBE_TOPOLOGY_LABELS: {{ join "," .Values.config.gpuNodes.topologyLabels | quote }}
DEFAULT_FROM_EMAIL: {{ .Values.config.email.from | quote }}
{{- /* Unset values stay out, so pai's own defaults apply rather than empty strings. */}}
{{- with .Values.config.csrfTrustedOrigins }}
CSRF_TRUSTED_ORIGINS: {{ join "," . | quote }}
{{- end }}
{{- with .Values.config.publicUrl }}
PAI_PUBLIC_URL: {{ . | quote }}
{{- end }}
{{- with .Values.config.email.host }}
EMAIL_HOST: {{ . | quote }}
EMAIL_PORT: {{ $.Values.config.email.port | quote }}
EMAIL_USE_TLS: {{ $.Values.config.email.useTls | quote }}
{{- end }}
{{- if eq .Values.config.authMode "oidc" }}
OIDC_RP_CLIENT_ID: {{ .Values.config.oidc.clientId | quote }}
OIDC_RP_SIGN_ALGO: {{ .Values.config.oidc.signAlgo | quote }}
OIDC_RP_SCOPES: {{ .Values.config.oidc.scopes | quote }}
OIDC_OP_AUTHORIZATION_ENDPOINT: {{ .Values.config.oidc.authorizationEndpoint | quote }}
OIDC_OP_TOKEN_ENDPOINT: {{ .Values.config.oidc.tokenEndpoint | quote }}
OIDC_OP_USER_ENDPOINT: {{ .Values.config.oidc.userEndpoint | quote }}
OIDC_OP_JWKS_ENDPOINT: {{ .Values.config.oidc.jwksEndpoint | quote }}
{{- end }}
{{- range $name, $value := .Values.config.extraEnv }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/* The Secret's data (base64). A generated SECRET_KEY, PAI_SECRETS_KEY and PAI_METRICS_TOKEN are kept across upgrades. */}}
{{- define "pai.secretData" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "pai.fullname" .) | default dict }}
{{- $generated := dig "data" "SECRET_KEY" "" $existing | b64dec }}
{{- $secretKey := .Values.secrets.secretKey | default $generated | default (randAlphaNum 64) -}}
SECRET_KEY: {{ $secretKey | b64enc | quote }}
{{- $generatedFernet := dig "data" "PAI_SECRETS_KEY" "" $existing | b64dec }}
{{- $fernetKey := .Values.secrets.secretsKey | default $generatedFernet | default (randBytes 32 | replace "+" "-" | replace "/" "_") }}
PAI_SECRETS_KEY: {{ $fernetKey | b64enc | quote }}
{{- $generatedMetrics := dig "data" "PAI_METRICS_TOKEN" "" $existing | b64dec }}
{{- $metricsToken := .Values.secrets.metricsToken | default $generatedMetrics | default (randAlphaNum 48) }}
PAI_METRICS_TOKEN: {{ $metricsToken | b64enc | quote }}
DATABASE_URL: {{ .Values.secrets.databaseUrl | b64enc | quote }}
{{- with .Values.secrets.redisUrl }}
REDIS_URL: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.secrets.oidcClientSecret }}
OIDC_RP_CLIENT_SECRET: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.secrets.emailPassword }}
EMAIL_HOST_PASSWORD: {{ . | b64enc | quote }}
{{- end }}
{{- end }}

{{/* What web, worker and the migration Job share in their pod spec. */}}
{{- define "pai.podSecurity" -}}
serviceAccountName: {{ include "pai.serviceAccountName" . }}
automountServiceAccountToken: true
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "pai.volumes" -}}
volumes:
  # The root filesystem is read-only; Python, gunicorn and pai write only here.
  - name: tmp
    emptyDir:
      sizeLimit: 1Gi
{{- end }}

{{- define "pai.volumeMounts" -}}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end }}
