"""SearchTools: the tools for a need written in words. A catalog intent that matches the whole query first, then
a ranked search over the tools' names, display names, descriptions and tags. (search/ is the file search.)"""

from .results import DEFAULT_RESULTS, MAX_QUERY_CHARACTERS, MAX_RESULTS, SearchHit, SearchResults
from .service import ToolSearch

__all__ = ["DEFAULT_RESULTS", "MAX_QUERY_CHARACTERS", "MAX_RESULTS", "SearchHit", "SearchResults", "ToolSearch"]
