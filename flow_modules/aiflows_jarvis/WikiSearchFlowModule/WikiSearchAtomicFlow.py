from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any, Dict, List

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow, check_time, current_flow_path, run_tool, shorten, tool_timeout

USER_AGENT = "aiflows-jarvis-AutoGPT/0.1 (https://github.com/epfl-dlab/aiflows)"


class WikiSearchError(Exception):
    """The MediaWiki API did not answer as expected."""


class WikiSearchAtomicFlow(LeanAtomicFlow):
    """Searches Wikipedia (any MediaWiki API) for a term and returns the introductions of the best pages.

    Two requests to the API: `list=search` for the titles, then `prop=extracts` (plain-text introductions) for the
    first `top_k_results` of them. Each request has a `timeout`, cut to the time the run's budget (`--max-time`)
    leaves: a wait the budget cuts short stops the run. The answer is cut to `max_chars`. Network errors and
    unexpected answers become a `wiki_content` saying so (the controller can try another term), never a crash.
    Calls go through `run_tool`, so a run's transcript records them and a replay answers them offline.

    *Configuration Parameters*:
    - `api_url` (str): the MediaWiki API endpoint; `{lang}` is replaced by `lang`
      (default `https://{lang}.wikipedia.org/w/api.php`).
    - `lang` (str): the Wikipedia language (`en`, `fr`, ...).
    - `top_k_results` (int): how many pages are read.
    - `max_chars_per_page` (int), `max_chars` (int): bounds of each introduction and of the whole answer.
    - `timeout` (float): seconds for each request.

    *Input Interface*:
    - `search_term` (str): what to look up.

    *Output Interface*:
    - `wiki_content` (str): `Page: <title>` and `Summary: <introduction>` for each page found, or what went wrong.
    """

    def endpoint(self) -> str:
        return str(self.flow_config.get("api_url") or "https://{lang}.wikipedia.org/w/api.php").replace(
            "{lang}", str(self.flow_config.get("lang") or "en")
        )

    def _get(self, **params: Any) -> Dict[str, Any]:
        query = urllib.parse.urlencode({**params, "format": "json", "formatversion": 1})
        request = urllib.request.Request(f"{self.endpoint()}?{query}", headers={"User-Agent": USER_AGENT})
        timeout = tool_timeout(float(self.flow_config.get("timeout") or 15), self._where())
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(2_000_000)
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise WikiSearchError("the API's answer is not JSON") from None
        if not isinstance(data, dict):
            raise WikiSearchError("the API's answer is not a JSON object")
        if isinstance(data.get("error"), dict):
            raise WikiSearchError(f"the API said: {data['error'].get('info') or data['error']}")
        return data

    def titles(self, term: str) -> List[str]:
        data = self._get(
            action="query", list="search", srsearch=term, srlimit=int(self.flow_config.get("top_k_results") or 3)
        )
        hits = (data.get("query") or {}).get("search") or []
        return [hit["title"] for hit in hits if isinstance(hit, dict) and isinstance(hit.get("title"), str)]

    def extract(self, title: str) -> str:
        data = self._get(action="query", prop="extracts", exintro=1, explaintext=1, redirects=1, titles=title)
        pages = (data.get("query") or {}).get("pages") or {}
        for page in pages.values():
            if isinstance(page, dict) and isinstance(page.get("extract"), str):
                return page["extract"].strip()
        return ""

    def search(self, term: str) -> str:
        try:
            titles = self.titles(term)
            if not titles:
                return f"No Wikipedia page matches {term!r}. Try other words."
            per_page = int(self.flow_config.get("max_chars_per_page") or 1500)
            parts = []
            for title in titles[: int(self.flow_config.get("top_k_results") or 3)]:
                summary = self.extract(title)
                if summary:
                    parts.append(f"Page: {title}\nSummary: {shorten(summary, per_page)}")
            text = "\n\n".join(parts) or f"The Wikipedia pages found for {term!r} have no introduction."
        except Exception as error:  # noqa: BLE001 - URLError, timeouts, bad answers: the controller reads it
            check_time(self._where())  # unless the run's time is up: then the budget stops the run
            reason = getattr(error, "reason", None) or error
            return (
                f"Error: the Wikipedia search for {term!r} failed ({type(error).__name__}: "
                f"{shorten(str(reason), 300)}). Try again, or another command."
            )
        return shorten(text, int(self.flow_config.get("max_chars") or 4000))

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        term = str(input_data.get("search_term") or "").strip()
        if not term:
            return {"wiki_content": "Error: wiki_search needs a non-empty search_term."}
        return {"wiki_content": run_tool(self._where(), {"search_term": term}, lambda: self.search(term))}

    def _where(self) -> str:
        return current_flow_path() or self.flow_config["name"]
