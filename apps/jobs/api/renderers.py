import yaml
from rest_framework.renderers import BaseRenderer


class YAMLRenderer(BaseRenderer):
    media_type = "text/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, str):
            return data.encode("utf-8")
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
