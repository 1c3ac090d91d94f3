"""The bodies of a job submission: OpenPAI's clients send the job YAML as text; JSON of the
same document is accepted too. Each is read only up to `PAI_JOB_PROTOCOL_MAX_BYTES`
(413 beyond); the protocol module then parses it and reports YAML errors with the line
and column."""

from django.conf import settings

from pai.api import parsers


class JobDocumentLimit:
    def limit(self):
        return settings.PAI_JOB_PROTOCOL_MAX_BYTES

    def read(self, stream, parser_context):
        return parsers.read_bounded(stream, self.limit(), parser_context, what="The job document")


class YAMLTextParser(JobDocumentLimit, parsers.BoundedParser):
    media_type = "text/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        return self.read(stream, parser_context)


class XYAMLTextParser(YAMLTextParser):
    media_type = "application/x-yaml"


class PlainTextParser(YAMLTextParser):
    # Some scripts post the YAML file as text/plain.
    media_type = "text/plain"


class JSONParser(JobDocumentLimit, parsers.JSONParser):
    pass
