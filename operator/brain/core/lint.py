"""The instruction lint: memory is data, so text shaped like orders to an agent is refused on write.

Every stored memory is later shown to every agent of the team, so the lint looks for the shapes an
attack takes, not for words: overrides of the agent's instructions, forged roles and chat-template
turns, role reassignment, tool-call syntax, download-and-execute pipelines, encoded execution and
reverse shells, destructive commands, exfiltration and concealment.

It reads *views* of the text, never the text alone, so obfuscation does not help: the folded view
(NFKC, look-alike letters mapped, invisible characters gone, accents stripped, lower case), a
de-leeted view (`1gn0r3` → `ignore`), a squashed view (letters only, so `i g n o r e` and
`i.g.n.o.r.e` read as one word), ROT13, HTML/URL-unescaped text and decoded base64 runs.

What a runbook may hold (docs/security.md): in `convention`, `skill` and `code` entries, commands
and tool-call examples inside fenced code blocks are data. Download-and-execute, encoded execution,
reverse shells and credential exfiltration are refused in every kind, fenced or not; only source
code imported from an owner's repository (`code`, origin `import`) may contain them. Model output
(origin `gateway`, i.e. capture) gets no exemption at all.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import urllib.parse
from collections.abc import Iterable

from brain.core.errors import InstructionRejected
from brain.core.sanitize import fold

RUNBOOK_KINDS = frozenset({"convention", "skill", "code"})
# Writers whose text is model output (capture, distill drafts): no exemption applies.
MODEL_ORIGINS = frozenset({"gateway", "model"})

_W = r"[^a-z0-9\n]{1,20}"  # a word gap in the folded view
# Every unbounded run in a pattern is capped (160 characters: a command line) so a hostile 32 KiB
# body cannot make matching quadratic.
_ANY_WORDS = r"(?:[a-z0-9'’]{1,40}" + _W + r"){0,4}?"
_STRONG = (
    r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|system|developer|safety|"
    r"your|the assistant'?s|hidden)"
)
_OBJECT = (
    r"(?:instructions?|prompts?|directives?|guidelines?|guardrails?|rules|constraints|polic(?:y|ies)|"
    r"programming|messages?|restrictions|commands|orders|directions)"
)

# Classes that read prose (every view).
_PROSE: dict[str, list[re.Pattern[str]]] = {
    "override_instructions": [
        # Round 3: the reader's own instructions described as changed, or its own safety switched off.
        re.compile(
            r"\byour"
            + _W
            + r"(?:[a-z]{1,40}"
            + _W
            + r"){0,2}?(?:instructions|system prompt|prompt|rules|guidelines|"
            r"directives|programming|orders|guardrails|policies)"
            + _W
            + r"(?:have|has|were|was|are|is)"
            + _W
            + r"(?:been"
            + _W
            + r")?(?:updated|changed|replaced|revoked|obsolete|void|suspended|lifted|superseded)\b"
        ),
        re.compile(
            r"\b(?:whatever|anything|everything|all) you (?:were|have been|'ve been) (?:told|given|instructed)"
            r"[^.\n]{0,40}?\b(?:before|earlier|previously|above|so far|until now)\b"
        ),
        re.compile(
            r"\b(?:skip|disable|turn off|switch off|bypass|suspend|drop|ignore)"
            + _W
            + r"your"
            + _W
            + r"(?:[a-z]{1,40}"
            + _W
            + r"){0,2}?(?:safety|security|guardrails?|restrictions|filters|content polic\w+)"
            + _W
            + r"?(?:review|reviews|checks?|rules|measures)?\b[^.\n]{0,40}?\b(?:for|on|in|when|this|now)\b"
        ),
        # Round-2 generalisation: any override verb, then instructions "you were given".
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|pay no attention to|no longer follow|stop following|"
            r"set aside|discard|drop)\b[^.\n]{0,40}?"
            + _OBJECT
            + _W
            + r"(?:you (?:were|have been|'ve been|got) (?:given|told|provided)|given to you|(?:given|provided) "
            r"(?:earlier|before|above|so far))"
        ),
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|overlook|neglect|abandon|discard|drop|set aside|put aside"
            r"|throw out|throw away|stop following|stop obeying)"
            + _W
            + _ANY_WORDS
            + _STRONG
            + _W
            + r"(?:[a-z0-9'’]{1,40}"
            + _W
            + r"){0,3}?"
            + _OBJECT
            + r"\b"
        ),
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)"
            + _W
            + r"(?:all|any|every)"
            + _W
            + r"(?:of"
            + _W
            + r")?(?:the"
            + _W
            + r")?"
            + _OBJECT
            + _W
            + r"(?:you|given|above|before|so far|until now)"
        ),
        re.compile(
            r"\b(?:new|updated|real|actual|true|revised|overriding|secret|hidden)"
            + _W
            + r"(?:system"
            + _W
            + r")?(?:instructions?|directives?|orders|system prompt)\s*[:\-]"
        ),
        re.compile(
            r"\b(?:these|the following|the (?:entries|memories|blocks|notes|lines) (?:below|above)|this "
            r"(?:memory|entry|block|note))" + _W + r"(?:are|is)" + _W + r"(?:[a-z]{1,40}" + _W + r"){0,2}?"
            r"(?:instructions|commands|directives|orders|system (?:prompt|messages?))\b"
        ),
        re.compile(
            r"\b(?:treat|consider|regard|interpret|handle)" + _W + r"(?:this|these|it|them|the following|"
            r"everything below)" + _W + r"(?:[a-z]{1,40}" + _W + r"){0,3}?as" + _W + r"(?:an?" + _W + r")?"
            r"(?:instructions?|commands?|system|authoritative|trusted|orders)\b"
        ),
        re.compile(r"\b(?:is|are)" + _W + r"not" + _W + r"(?:just" + _W + r")?data\b"),
        re.compile(r"\bnot" + _W + r"data" + _W + r"but" + _W + r"instructions\b"),
        re.compile(
            r"\b(?:previous|prior|earlier|above|original|system|old)"
            + _W
            + r"(?:[a-z]{1,40}"
            + _W
            + r")?"
            + _OBJECT
            + _W
            + r"(?:no longer apply|are void|are revoked|are cancell?ed|do not apply|don't apply|are obsolete)"
        ),
        re.compile(
            r"\binstead of"
            + _W
            + r"(?:your|the)"
            + _W
            + r"(?:original"
            + _W
            + r")?(?:instructions|system prompt)"
        ),
        re.compile(
            r"\b(?:do not|don't|never)"
            + _W
            + r"follow"
            + _W
            + r"(?:your|the)"
            + _W
            + r"(?:original|previous|system)"
            + _W
            + _OBJECT
        ),
    ],
    "role_reassignment": [
        re.compile(
            r"\b(?:imagine|suppose|assume) (?:that )?you(?: are|'re) (?:now )?(?:root|an? admin|the admin|the owner|"
            r"an? (?:unrestricted|unfiltered)|sudo|god|in control)\b"
        ),
        re.compile(r"\b(?:role-?play|roleplay|play-?act) as\b"),
        re.compile(
            r"\b(?:henceforth|hereafter|from here on|going forward),? you (?:are|will|must|shall|should)\b"
        ),
        re.compile(r"\byou (?:will|must|shall|should) (?:now )?(?:behave|act|operate|respond) as\b"),
        re.compile(
            r"\b(?:assume|take on|adopt|play) the (?:role|persona|identity) of\b[^.\n]{0,60}?"
            r"\b(?:without|no|unrestricted|unfiltered|jailbroken|ignor\w+|uncensored)\b"
        ),
        re.compile(r"\byou(?: are|'re|’re| r) now\b"),
        re.compile(
            r"\b(?:starting|beginning|effective) (?:today|now|immediately),? you (?:are|will be|act as)\b"
        ),
        re.compile(r"\bfrom now on,?" + _W + r"(?:you|your|act|respond|answer|always|never|reply)\b"),
        re.compile(
            r"\byour"
            + _W
            + r"(?:new|real|true|actual)"
            + _W
            + r"(?:role|persona|identity|task|job|purpose)\b"
        ),
        re.compile(r"\bpretend" + _W + r"(?:to be|you are|that you are|you're)\b"),
        re.compile(
            r"\bact as" + _W + r"(?:if you|though you|an? (?:unrestricted|jailbroken|unfiltered|evil)|dan\b)"
        ),
        re.compile(
            r"\b(?:enter|enable|activate|switch to)"
            + _W
            + r"(?:developer|god|dan|jailbreak|debug|sudo|admin)"
            + _W
            + r"mode\b"
        ),
        re.compile(
            r"\byou (?:must|will|shall) (?:now )?(?:obey|comply with|follow) (?:me|these|this|the following)\b"
        ),
        re.compile(r"\byou have no (?:restrictions|rules|guidelines|limits|filters)\b"),
    ],
    "role_forgery": [
        # Decorated role labels: `### SYSTEM MESSAGE ###`, `(system)`, `== developer ==`.
        re.compile(
            r"^[ \t>*#=(\[-]*(?:system|developer|assistant)(?: (?:message|prompt|note|override))?[ \t]*(?:#{2,}|={2,}|\)|-{3,})",
            re.M,
        ),
        # `[user] …` with text after it (a bare `[user]` line is an INI/gitconfig section).
        re.compile(
            r"^[ \t>*#-]*\[\s*/?\s*(?:user|system|tool|owner|admin)\s*\][ \t]*[:\-]?[ \t]*[^\s=]", re.M
        ),
        re.compile(r"^[ \t>*#-]*\[\s*/?\s*(?:assistant|developer|human|ai|inst|sys)\s*\]", re.M),
        # A role label opening a line and a sentence after it (`system: linux` is YAML, not a turn).
        re.compile(
            r"^[ \t>*#-]*(?:system|developer|assistant|human|ai assistant)(?: (?:prompt|message|note))?[ \t]*:"
            r"(?:[ \t]*\S+(?:[ \t]+\S+){2,}|[ \t]*\n)",
            re.M,
        ),
        re.compile(
            r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\s*\|>"
        ),
        re.compile(r"<<\s*/?\s*sys\s*>>|\[/?inst\]|<start_of_turn>|<end_of_turn>"),
        re.compile(r"</?\s*(?:system|system[-_ ]prompt|instructions?|assistant|developer|im_start)\s*>"),
        re.compile(r"\[\s*team (?:memory|persona)\b"),
        re.compile(r"\bdata,? not instructions\b"),
        re.compile(r"\b(?:tier|origin)\s*=\s*(?:curated|owner)\b"),
        re.compile(
            r"\b(?:begin|start|end)(?: of)?"
            + _W
            + r"(?:the"
            + _W
            + r")?(?:system prompt|system message|instructions|memory block|team memory)\b"
        ),
    ],
    "exfiltration": [
        re.compile(
            r"\b(?:append|add|attach|include|put|embed|send)\b[^\n]{0,40}?\b[a-z0-9_]*(?:api_key|apikey|token|secret|"
            r"password|credentials?)\b[^\n]{0,60}?\b(?:url|urls|request|requests|query|header|fetch|link|image|every)\b"
        ),
        re.compile(
            r"\b(?:include|paste|show|print|send|reveal|output|add|attach|quote|read out|dump)\b[^\n]{0,60}?"
            r"(?:~/\.ssh|~/\.aws|\.aws/credentials|id_rsa|id_ed25519|\.env\b|\.netrc|\.kube/config|/etc/shadow|"
            r"\.git-credentials|api keys?|private keys?|access tokens?)[^\n]{0,60}?"
            r"\b(?:reply|answer|response|message|output|to the user|comment|pull request|issue|commit)\b"
        ),
        re.compile(
            r"\b(?:reveal|print|output|exfiltrate|send|leak|upload|post|forward|transmit|email|paste)"
            + _W
            + r"(?:[a-z0-9'’]{1,40}"
            + _W
            + r"){0,5}?(?:system prompt|api keys?|secrets?|credentials|tokens?|passwords?|"
            r"env(?:ironment)? var(?:iable)?s|\.env|ssh keys?|private keys?|conversation|chat history|"
            r"the user'?s (?:code|data|files|messages))"
            + _W
            + r"(?:[a-z0-9'’]{1,40}"
            + _W
            + r"){0,5}?(?:to|at|into|via|on)\b"
        ),
        re.compile(
            r"\b(?:print|reveal|show|output|repeat|display|dump|leak)"
            + _W
            + r"(?:[a-z]{1,40}"
            + _W
            + r"){0,3}?"
            r"(?:your|the)"
            + _W
            + r"(?:full"
            + _W
            + r"|entire"
            + _W
            + r"|exact"
            + _W
            + r")?(?:system prompt|initial "
            r"instructions|hidden instructions|original instructions|instructions above)"
        ),
        re.compile(r"!\[[^\]\n]*\]\(\s*https?://[^)\s]*[?&][^)\s]*=\s*(?:\{|\$|%7b|<)"),
    ],
    "concealment": [
        re.compile(
            r"\bkeep the (?:user|human|developer|operator)s? (?:in the dark|unaware|uninformed|out of (?:it|the loop))\b"
        ),
        re.compile(
            r"\b(?:do not|don't|never)"
            + _W
            + r"(?:mention|reveal|disclose|cite|acknowledge|reference|admit)"
            + _W
            + r"(?:this|these|the|that)"
            + _W
            + r"(?:note|notes|memory|memories|entry|entries|instructions?|block|message|change)\b"
        ),
        re.compile(
            r"\b(?:do not|don't|never)"
            + _W
            + r"(?:tell|inform|mention|reveal|alert|notify|show)"
            + _W
            + r"(?:this"
            + _W
            + r"|it"
            + _W
            + r")?(?:to"
            + _W
            + r")?the (?:user|human|developer|operator)\b"
        ),
        re.compile(
            r"\b(?:without|never)"
            + _W
            + r"(?:telling|informing|asking|notifying|alerting|showing) the (?:user|human)\b"
        ),
        re.compile(
            r"\bkeep"
            + _W
            + r"(?:this|it)"
            + _W
            + r"(?:secret|hidden|quiet) from"
            + _W
            + r"the (?:user|human)\b"
        ),
        re.compile(
            r"\bthe (?:user|human)" + _W + r"(?:must|should) not" + _W + r"(?:know|see|find out|notice)\b"
        ),
        re.compile(r"\bsilently" + _W + r"(?:run|execute|install|delete|send|upload|exfiltrate|modify)\b"),
    ],
}

# Squashed view (letters only): letter-spaced or punctuated overrides.
_SQUASHED: dict[str, list[re.Pattern[str]]] = {
    "override_instructions": [
        re.compile(
            r"(?:ignore|disregard|forget|override|bypass)(?:all|any|of|the|your|my)*(?:previous|prior|above|earlier|"
            r"preceding|original|initial|system|developer)(?:instructions?|prompts?|directives?|guidelines?|rules)"
        ),
        re.compile(r"(?:new|updated|real)systeminstructions|newinstructions(?:are|follow)"),
    ],
    "role_reassignment": [re.compile(r"youarenow(?:a|an|the|dan|my|in)|fromnowonyou(?:are|will|must)")],
    "concealment": [re.compile(r"(?:donot|dont|never)(?:tell|inform|mention)(?:this|it)?(?:to)?theuser")],
}

# Command classes read the folded view with its lines.
_COMMANDS: dict[str, list[re.Pattern[str]]] = {
    "remote_execution": [
        re.compile(
            r"\b(?:ruby|perl|python[0-9.]*|node|php|bash|sh|zsh)\s+-[a-z]*[ec][a-z]*\s+[\"']?\$\(\s*(?:curl|wget|fetch)\b"
        ),
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,160}(?:-o|-O|--output)\s*(\S+)[^\n]{0,160}(?:&&|;)\s*(?:sudo\s+)?"
            r"(?:(?:ba|z)?sh|source|python[0-9.]*|\.)\s+\S"
        ),
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,160}\bchmod\s+(?:[ugoa]*\+x|[0-7]*[157][0-7]{0,2})\b[^\n]{0,160}(?:;|&&)\s*"
            r"(?:sudo\s+)?\.{0,2}/\S+"
        ),
        re.compile(
            r"\b(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod|http|aria2c|lynx)\b[^\n|;]{0,160}\|\s*"
            r"(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+\S+\s+)?(?:/\S*/)?(?:(?:ba|z|k|da|fi|c|tc)?sh|python[0-9.]*|perl|ruby|node|"
            r"php|iex|invoke-expression|powershell|pwsh|source|bun|deno)\b"
        ),
        re.compile(
            r"(?:\b(?:(?:ba|z|k)?sh|source|python[0-9.]*|perl|ruby|node|php)|(?<![\w.])\.)\s+(?:-\S+\s+)*<\(\s*"
            r"(?:curl|wget|fetch)\b"
        ),
        re.compile(r"\b(?:(?:ba|z|k)?sh\s+-c|eval|exec)\s+[\"']?\$\(\s*(?:curl|wget|fetch)\b"),
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,160}(?:&&|;|\|\|)\s*(?:sudo\s+)?(?:(?:ba|z)?sh|source|\.)\s+\S"
        ),
        re.compile(
            r"\b(?:iex|invoke-expression)\s*\(?\s*(?:\(\s*)?(?:new-object|iwr|irm|invoke-webrequest|invoke-restmethod)\b"
        ),
        re.compile(r"\bdownloadstring\s*\(|\bdownloadfile\s*\([^\n]{0,160}\)\s*;\s*(?:start-process|&|\.)"),
        re.compile(
            r"\b(?:powershell|pwsh)(?:\.exe)?\b[^\n]{0,160}\s-(?:e|enc|encodedcommand)\s+[a-z0-9+/=]{16,}"
        ),
        re.compile(
            r"\bbase64\s+(?:-d|--decode|-D)\b[^\n]{0,160}\|\s*(?:sudo\s+)?(?:(?:ba|z)?sh|python[0-9.]*|perl|bash)\b"
        ),
        re.compile(r"\|\s*base64\s+(?:-d|--decode)\s*\|\s*(?:(?:ba|z)?sh|python[0-9.]*)\b"),
        re.compile(
            r"\b(?:exec|eval)\s*\(\s*(?:base64\.b64decode|__import__|urllib|requests\.get|atob|compile\()"
        ),
        re.compile(
            r"\bpython[0-9.]*\s+-c\s+[\"'][^\"'\n]{0,160}(?:socket|subprocess|os\.system|pty\.spawn|urlopen)"
        ),
        re.compile(r"/dev/(?:tcp|udp)/"),
        re.compile(r"\b(?:nc|ncat|netcat)\b[^\n]{0,160}\s-(?:e|c)\s+\S*(?:sh|cmd)"),
        re.compile(r"\b(?:ba)?sh\s+-i\s*[<>]&"),
        re.compile(r"\bmkfifo\b[^\n]{0,160}\b(?:nc|ncat|netcat)\b"),
        re.compile(r"\bsocat\b[^\n]{0,160}\bexec:"),
    ],
    "exfiltration_command": [
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,160}\$\(\s*cat\s+[^\n)]{0,160}(?:\.ssh|\.aws|\.env|\.netrc|\.kube|id_rsa)"
        ),
        re.compile(
            r"\b(?:scp|rsync|sftp|rclone)\b[^\n]{0,160}(?:\.ssh\b|id_rsa|id_ed25519|\.aws\b|\.netrc|\.kube\b|\.env\b|"
            r"/etc/shadow|\.git-credentials|\.gnupg)[^\n]{0,160}\s[\w.@-]{1,100}:"
        ),
        re.compile(
            r"(?:\.ssh\b|id_rsa|id_ed25519|\.aws/credentials|\.netrc|\.kube/config|/etc/shadow|\.env\b|\.npmrc|\.gnupg|"
            r"\.pypirc|\.git-credentials|\.docker/config\.json)[^\n]{0,160}\|\s*(?:curl|wget|nc|ncat|netcat|base64|xxd)\b"
        ),
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,160}(?:-d|--data(?:-binary|-raw|-urlencode)?|-f|--form|-t|--upload-file|--post-file)"
            r"[ =]*['\"]?@?[^\s'\"]{0,160}(?:\.ssh/|id_rsa|id_ed25519|\.aws/|\.netrc|\.kube/|/etc/passwd|/etc/shadow|\.env\b|"
            r"\.git-credentials)"
        ),
        re.compile(r"\b(?:env|printenv|set)\s*\|\s*(?:curl|wget|nc|ncat|netcat)\b"),
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,160}\$\(\s*(?:env|printenv|cat\s+[^\n)]{0,160}(?:\.ssh|\.aws|\.env|\.netrc))"
        ),
    ],
    "destructive_command": [
        re.compile(r"\bkubectl\s+delete\s+(?:namespace|ns|pv|pvc|--all\b|-a\b)"),
        re.compile(r"\bterraform\s+destroy\b|\bhelm\s+uninstall\b[^\n]{0,160}\bprod"),
        re.compile(r"\bfind\s+(?:/|~/?|\$home/?)\s[^\n]{0,160}(?:-delete\b|-exec\s+rm\b)"),
        re.compile(
            r"\brm\s+(?:-[a-z-]+\s+)*-[a-z]*(?:rf|fr|r[a-z]*f|f[a-z]*r)[a-z]*\s+(?:[^\s;&|]{1,200}\s+){0,20}?"
            r"(?:/(?:\*|bin|boot|etc|home|lib|usr|var)?|~/?|\$home/?|\*|\.\./?)(?=\s|$|;|&|\||\"|'|`)"
        ),
        re.compile(r"--no-preserve-root"),
        re.compile(r"\bmkfs(?:\.\w+)?\s+(?:-\S+\s+)*/dev/"),
        re.compile(r"\bdd\s+[^\n]{0,160}\bof=/dev/(?:sd|nvme|hd|xvd|vd|disk|mmcblk)"),
        re.compile(r"(?:>|\bshred\b[^\n]{0,160})\s*/dev/(?:sd|nvme|hd|xvd|vd|disk)[a-z0-9]*\b"),
        re.compile(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
        re.compile(r"\bchmod\s+(?:-r\s+)?(?:0?777|a\+rwx)\s+/(?:\s|$)"),
        re.compile(r"\bdrop\s+(?:database|schema)\s+(?:if\s+exists\s+)?[a-z_\"]"),
        re.compile(r"\bgit\s+push\b[^\n]{0,160}\s(?:--force|-f)(?=\s)[^\n]{0,160}\b(?:main|master)\b"),
    ],
    "tool_invocation": [
        re.compile(
            r"<\s*(?:tool|tool_name|function|args|arguments)\s*>[^<\n]{1,80}<\s*/\s*(?:tool|tool_name|function|args|arguments)\s*>"
        ),
        re.compile(r"\b(?:functions|tools|mcp)\.[a-z_][\w-]{1,60}\s*\(\s*\{"),
        re.compile(r"\b(?:call|invoke|run|use)(?: the)? (?:mcp )?tool\s+[\w.-]+\s*[({]"),
        re.compile(r"[\"'](?:tool_calls?|function_call|tool_use|tool_name|tool_input|functioncall)[\"']\s*:"),
        re.compile(
            r"\{\s*[\"'](?:name|tool|function|action|recipient_name)[\"']\s*:\s*[\"'][^\"'\n]{1,80}[\"']\s*,\s*"
            r"[\"'](?:arguments|args|parameters|input|params|action_input)[\"']\s*:"
        ),
        re.compile(r"[\"']type[\"']\s*:\s*[\"'](?:tool_use|function|tool_call)[\"']"),
        re.compile(
            r"<\s*/?\s*(?:[a-z]+:)?(?:tool_call|tool_calls|function_call|function_calls|tool_use|invoke|use_mcp_tool|"
            r"execute_command|run_command|tool_code|parameter\s+name)\b"
        ),
        re.compile(
            r"\b(?:call|invoke|use|run) the [\w.-]+ (?:tool|function|mcp tool) (?:with|passing|using)\b"
        ),
        re.compile(
            r"\b(?:bash|shell|execute_command|run_terminal_cmd|run_shell_command|computer|str_replace_editor|"
            r"write_file|edit_file)\s*\(\s*(?:command|cmd|url|path|action)\s*="
        ),
    ],
}

# Classes a runbook may hold inside its code fences (RUNBOOK_KINDS, non-capture origins).
_FENCE_OK = frozenset({"destructive_command", "tool_invocation"})
# Classes only imported source code may hold.
_IMPORT_CODE_OK = frozenset(
    {"remote_execution", "exfiltration_command", "destructive_command", "tool_invocation", "role_forgery"}
)
CLASSES: tuple[str, ...] = (*_PROSE, *_COMMANDS)

_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i", "|": "l"}
)
_B64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_FENCE_BLOCK = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]{0,160}\n.*?(?:^[ \t]*\1[`~]*[ \t]*$|\Z)", re.S | re.M)


def _decoded_runs(text: str) -> Iterable[str]:
    """Printable text hidden in base64 runs (an encoded "ignore previous instructions")."""
    for m in _B64_RUN.finditer(text):
        tok = m.group(0)
        try:
            raw = base64.b64decode(tok + "=" * (-len(tok) % 4), validate=True)
            s = raw.decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            continue
        if s and sum(c.isprintable() or c in "\n\t" for c in s) >= 0.95 * len(s):
            yield s


def views(text: str) -> list[str]:
    """The readings of `text` that the prose classes check (all lower case, folded)."""
    base = fold(text).lower()
    out = [base]
    unescaped = fold(html.unescape(urllib.parse.unquote(text))).lower()
    if unescaped != base:
        out.append(unescaped)
    leet = base.translate(_LEET)
    if leet != base:
        out.append(leet)
    out.extend(fold(s).lower() for s in _decoded_runs(text))
    return out


def _squashed(view: str) -> str:
    return re.sub(r"[^a-z]+", "", view)


def without_fences(text: str) -> str:
    """The text with fenced code blocks removed (what is prose, not a quoted command)."""
    return _FENCE_BLOCK.sub("\n", text)


def findings(text: str, *, kind: str = "note", origin: str = "agent") -> list[str]:
    """The lint classes `text` falls into, under the policy for its kind and writer's origin."""
    if not text:
        return []
    found: set[str] = set()
    vs = views(text)
    for name, patterns in _PROSE.items():
        if any(p.search(v) for v in vs for p in patterns):
            found.add(name)
    squashed = [_squashed(v) for v in vs]
    squashed.append(_squashed(codecs.encode(vs[0], "rot13")))
    for name, patterns in _SQUASHED.items():
        if name not in found and any(p.search(s) for s in squashed for p in patterns):
            found.add(name)
    strict = origin in MODEL_ORIGINS
    import_code = origin == "import" and kind == "code"
    folded = vs[0]  # views() starts with fold(text).lower()
    # fences are found on the folded text, the one a reader sees once NFC/NFKC made U+1FEF or U+FF40
    # backticks: a fence that only exists before normalisation exempts nothing
    prose = without_fences(folded) if kind in RUNBOOK_KINDS and not strict else folded
    for name, patterns in _COMMANDS.items():
        where = prose if name in _FENCE_OK else folded
        if any(p.search(where) for p in patterns):
            found.add(name)
    if kind == "persona" and not strict:
        found.discard("role_reassignment")  # a persona is a role, by design (and only curated ones are used)
    if import_code:
        found -= _IMPORT_CODE_OK
    return [c for c in CLASSES if c in found]


def check(field: str, text: str, *, kind: str = "note", origin: str = "agent") -> None:
    found = findings(text, kind=kind, origin=origin)
    if found:
        raise InstructionRejected(
            f"{field} reads like instructions to an agent ({', '.join(found)}); memories are data — state the "
            "fact or decision instead of commanding the reader (runbook commands belong in a code fence of a "
            "convention or skill entry; download-and-execute is never stored)",
            field=field,
        )
