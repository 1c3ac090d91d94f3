from rest_framework.parsers import BaseParser


class YAMLTextParser(BaseParser):
    """A job document as OpenPAI's clients send it: YAML text. Parsed later by the protocol
    module, which reports YAML errors with the line and column."""

    media_type = "text/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


class XYAMLTextParser(YAMLTextParser):
    media_type = "application/x-yaml"


class PlainTextParser(YAMLTextParser):
    # Some scripts post the YAML file as text/plain.
    media_type = "text/plain"
