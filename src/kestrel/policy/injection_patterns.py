"""The shapes of text that instructs the agent: English, other languages, pipes and hidden tags.

Each pattern is a `(kind, regex)` pair. The scanner runs them over the raw text and over decoded
views of it (see `injection_views`), so a pattern here only has to know what plain text looks like.
"""

# Phrases in other alphabets hold letters that look Latin; that is what they are.
# ruff: noqa: RUF001

from __future__ import annotations

import re

Gates = tuple[tuple[str, ...], ...]
"""Lowercase words a text must hold (one of each group) before a pattern is tried on it."""
Pattern = tuple[str, re.Pattern[str], Gates]

_I = re.IGNORECASE
_IM = re.IGNORECASE | re.MULTILINE

_VERBS = (
    r"(?:run|execute|exec|call|invoke|fetch|curl|wget|download|install|delete|remove|rm|send|"
    r"upload|post|push|write|overwrite|open|read|cat|copy|export|print|reveal|disable|skip)"
)
ADDRESSEE = (
    r"(?:ai|llm|agent|assistant|model|claude|codex|kestrel|copilot|cursor|gpt|chatgpt|bot|"
    r"gemini|devin|aider|windsurf|cline)s?"
)
_LINE_PREFIX = r"(?:[ \t]*+\d++\t|[^\n:]{1,200}+:\d++:[ \t]?)?"
"""What tools put before a line of a file: `read_file`'s line number, `grep`'s `path:line:`."""
_LINE_START = "(?:^|(?<=\u2028))"
"""The start of a line, or of a line joined into a comment block (see `injection_views.JOIN`)."""
_MARKERS = r"[\s#/*;>\"'`-]*"
"""Comment markers and quotes a line may start with before the text addressed to the agent."""

_ML_ADDRESSEE = (
    r"(?:IA|asistente|agente|modelo|assistente|assistant|KI|Assistent|Agent|Modell|ИИ|"
    r"ассистент|агент|модель|нейросеть|AI|LLM|助手|人工智能|智能体|代理|模型|アシスタント|"
    r"エージェント|モデル)"
)
_ML_RUN = (
    r"(?:ejecuta|ejecute|ejecutar|corre|exécute[rz]?|lance[rz]?|führe|führen|starte|"
    r"executa|execute|rode|выполни|выполните|запусти|запустите|运行|執行|执行|実行)"
)
_ROLE_TAGS = r"(?:system|assistant|system[_-]prompt|instructions)"

ENGLISH: tuple[Pattern, ...] = (
    (
        "override",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|"
            r"of\s+)*(?:previous|prior|above|earlier|preceding|original|system|existing)\s+"
            r"(?:instructions|prompts?|directions|rules|guidelines|messages|context)",
            _I,
        ),
        (("ignore", "disregard", "forget", "override", "bypass"),),
    ),
    (
        "new instructions",
        re.compile(
            r"\b(?:new|updated|real|actual|secret|hidden)\s+(?:system\s+)?instructions?\s*:", _I
        ),
        (("instruction",),),
    ),
    (
        "addressed to the agent",
        re.compile(
            # One pattern for English and other languages: each costs a pass over the text.
            rf"{_LINE_START}{_LINE_PREFIX}{_MARKERS}"
            rf"(?:(?:{ADDRESSEE}|system|note (?:to|for) (?:the\s+)?{ADDRESSEE})\s*[:>,-]\s*"
            r"(?:please\s+)?(?:you\s+(?:must|should)\s+)?(?:now\s+)?"
            rf"{_VERBS}\b"
            rf"|(?:{_ML_ADDRESSEE})\s*[:,：，、]\s*"
            rf"(?:por\s+favor\s+|s'il\s+te\s+plaît\s+|bitte\s+|пожалуйста,?\s+|请|請|)?[^\n]{{0,40}}?"
            rf"{_ML_RUN})",
            _IM,
        ),
        (),
    ),
    (
        "addressed to the agent",
        re.compile(
            rf"\b(?:{ADDRESSEE})\s*,?\s+(?:must|should|are\s+(?:instructed|required)\s+to|"
            rf"need\s+to|have\s+to|shall)\s+(?:now\s+|always\s+|immediately\s+|first\s+)?{_VERBS}\b",
            _I,
        ),
        (("must", "should", "instructed", "required", "need", "have to", "shall"),),
    ),
    (
        "addressed to the agent",
        re.compile(
            rf"\b(?:important|attention|urgent)\s*[:!-]?\s*(?:for|to)\s+(?:the\s+|any\s+|all\s+)?"
            rf"{ADDRESSEE}\b",
            _I,
        ),
        (("important", "attention", "urgent"),),
    ),
    (
        "role markup",
        re.compile(
            # An opening tag counts at the start of a line; mid-line, "version <system>" is prose.
            rf"<\|im_start\|>|<\|(?:system|assistant)\|>|</\s*{_ROLE_TAGS}\s*>"
            rf"|^{_LINE_PREFIX}{_MARKERS}<\s*{_ROLE_TAGS}\s*>|\[/?INST\]",
            _IM,
        ),
        (("<|", "system", "assistant", "instructions", "inst]"),),
    ),
    (
        "concealment",
        re.compile(
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|alert|show)\s+"
            r"(?:the\s+)?(?:user|human|person|operator)\b",
            _I,
        ),
        (("user", "human", "person", "operator"), ("not", "don't", "never")),
    ),
    (
        "role change",
        re.compile(
            r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:a|an|in|the|my|free|allowed|unrestricted)\b",
            _I,
        ),
        (("you",),),
    ),
)

MULTILINGUAL: tuple[Pattern, ...] = (
    (
        "override",
        re.compile(
            r"\b(?:ignora|ignore[sz]?|ignorar|olvida|olvide|omite|esqueça|esqueca|oublie[rz]?)"
            r"\s+(?:todas\s+|toutes\s+|tutte\s+)?(?:las\s+|les\s+|as\s+|le\s+|vos\s+|tes\s+|sus\s+)?"
            r"(?:instrucciones|instructions|instruções|instrucoes|istruzioni|consignes)\s+"
            r"(?:anteriores|previas|prévias|précédentes|antérieures|ci-dessus|precedenti)",
            _I,
        ),
        (("instru", "istruz", "consign"),),
    ),
    (
        "override",
        re.compile(
            r"\b(?:ignorier(?:e|en)?|vergiss|vergessen)\s+(?:sie\s+)?(?:alle\s+)?(?:die\s+)?"
            r"(?:vorherigen|bisherigen|obigen|früheren|vorigen)\s+"
            r"(?:Anweisungen|Instruktionen|Befehle|Regeln)",
            _I,
        ),
        (("anweisung", "instruktion", "befehl", "regeln"),),
    ),
    (
        "override",
        re.compile(
            r"(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте)\s+(?:все\s+)?"
            r"(?:предыдущие|прежние|прошлые|вышеуказанные)\s+(?:инструкции|указания|команды)",
            _I,
        ),
        (("инструкц", "указани", "команд"),),
    ),
    (
        "override",
        re.compile(
            r"(?:忽略|无视|無視|忘记|忘記|忘掉)(?:掉)?(?:所有|一切|全部)?(?:之前|以上|前面|先前|上述|此前)"
            r"(?:的)?(?:所有|全部)?(?:指令|指示|说明|說明|提示|规则|規則)"
        ),
        (("忽略", "无视", "無視", "忘记", "忘記", "忘掉"),),
    ),
    (
        "override",
        re.compile(
            r"(?:以前|前|これまで|上記|先)の(?:すべての|全ての)?(?:指示|命令|指令)を"
            r"(?:すべて|全て)?(?:無視|忘れ)"
        ),
        (("無視", "忘れ"),),
    ),
    (
        "role change",
        re.compile(
            r"\b(?:ahora\s+eres|tu\s+es\s+maintenant|vous\s+êtes\s+maintenant|désormais,?\s+tu\s+es|"
            r"du\s+bist\s+(?:jetzt|nun|ab\s+sofort)|agora\s+você\s+é|você\s+agora\s+é|"
            r"ora\s+sei)\s+(?:un|una|une|ein|eine|um|uma|libre|libero|frei|livre)\b",
            _I,
        ),
        (("eres", "maintenant", "désormais", "bist", "você", "sei "),),
    ),
    ("role change", re.compile(r"теперь\s+ты\s+\w+|ты\s+теперь\s+\w+", _I), (("теперь",),)),
    (
        "role change",
        re.compile(
            r"你现在是|你現在是|从现在起你是|從現在起你是|今からあなたは|あなたは今から|これからあなたは"
        ),
        (("你现在", "你現在", "从现在起", "從現在起", "あなたは"),),
    ),
    (
        "concealment",
        re.compile(
            r"\b(?:no\s+(?:le\s+)?(?:digas|informes|menciones|cuentes|diga)\s+(?:nada\s+)?al\s+usuario|"
            r"ne\s+(?:le\s+)?(?:dis|dites)\s+pas\s+à\s+l'utilisateur|n'en\s+parle[zs]?\s+pas\s+à\s+"
            r"l'utilisateur|sans\s+(?:le\s+)?dire\s+à\s+l'utilisateur|"
            r"(?:sag|sage|sagen\s+sie|erzähl|erzähle|teile)\s+(?:es\s+|das\s+)?dem\s+"
            r"(?:Benutzer|Nutzer|Anwender)\s+nicht|ohne\s+(?:es\s+)?dem\s+(?:Benutzer|Nutzer)|"
            r"não\s+(?:conte|diga|informe|mencione)\s+(?:nada\s+)?(?:ao|para\s+o)\s+usuário)",
            _I,
        ),
        (("usuario", "utilisateur", "benutzer", "nutzer", "anwender", "usuário"),),
    ),
    (
        "concealment",
        re.compile(
            r"не\s+(?:говори|сообщай|рассказывай|показывай|говорите|сообщайте)\s+(?:об\s+этом\s+)?"
            r"пользователю|不要(?:告诉|告訴|通知|让|讓)用户|不要(?:告诉|告訴)使用者|别告诉用户|"
            r"ユーザーに(?:は)?(?:言わない|伝えない|知らせない|教えない|言わず|伝えず)",
            _I,
        ),
        (("пользовател", "用户", "使用者", "ユーザー"),),
    ),
)

_FETCH = r"(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)\b"
_SHELLS = (
    r"(?:sudo\s+(?:-\S+\s+)*)?"
    r"(?:sh|bash|zsh|dash|ksh|python[0-9.]*|perl|ruby|node|iex|invoke-expression)\b"
)
PIPE_TO_SHELL = re.compile(
    rf"{_FETCH}[^\n|]{{0,300}}\|\s*{_SHELLS}"
    rf"|(?:iex|invoke-expression)\s*\(?\s*(?:\(\s*)?(?:iwr|irm|invoke-webrequest|invoke-restmethod|"
    rf"new-object\s+net\.webclient)"
    rf"|(?:sh|bash|zsh|python[0-9.]*)\s+<\(\s*(?:curl|wget)\b"
    rf"|(?:sh|bash|zsh)\s+-c\s+[\"']?\$\(\s*(?:curl|wget)\b",
    _I,
)
"""A command that runs what it downloads."""

VOCATIVE = re.compile(
    rf"(?:{_LINE_START}{_LINE_PREFIX}{_MARKERS}|[.!?]\s+|\(\s*)(?:{ADDRESSEE})\s*[:,]"
    rf"|\bnote\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?{ADDRESSEE}\b"
    rf"|\b(?:if|when|since|as)\s+you\s+are\s+an?\s+(?:ai|llm|language\s+model|agent|assistant|"
    rf"coding\s+agent|bot)\b"
    rf"|\b(?:dear|hey|hi|hello|attention|to)\s+(?:the\s+|any\s+|all\s+)?(?:ai\s+)?{ADDRESSEE}\b"
    rf"|\b(?:ai|llm|coding|autonomous)\s+(?:agents?|assistants?|models?|tools?)\s*"
    rf"(?:reading\s+this\b|must\b|should\b|need\s+to\b|have\s+to\b|are\s+(?:required|instructed)\b|,|:)"
    rf"|\b(?:{ADDRESSEE})\s+(?:must|should|need\s+to|has\s+to|have\s+to|shall)\b"
    rf"|\b(?:instructions?|notes?|rules|guidance|guidelines|steps)\s+(?:for|to)\s+(?:any\s+|all\s+|the\s+)?"
    rf"(?:ai\s+|llm\s+|coding\s+)?(?:{ADDRESSEE})\b",
    _IM,
)
"""Words that speak to the agent, as opposed to speaking about it ("install the agent")."""

TAGS: tuple[Pattern, ...] = (
    (
        "instruction tag",
        re.compile(
            rf"@(?:{ADDRESSEE})[-_]?(?:instructions?|note|directive|prompt|task|command|rule)s?\b"
            rf"|@(?:ai|llm|agent|assistant)\s*:",
            _I,
        ),
        (("@",),),
    ),
    (
        "instruction tag",
        re.compile(
            rf"<!--\s*(?:{ADDRESSEE}|{_ML_ADDRESSEE}|(?:instructions?|prompt|note)\s+(?:for|to)\s+(?:the\s+)?"
            rf"{ADDRESSEE})\b\s*(?:instructions?\s*)?[:,-]",
            _I,
        ),
        (("<!--",),),
    ),
    (
        "instruction tag",
        re.compile(
            rf"\[//\]:\s*#\s*[(\"']\s*(?:{ADDRESSEE}|{_ML_ADDRESSEE})\b\s*(?:instructions?\s*)?[:,-]",
            _I,
        ),
        (("[//]",),),
    ),
    (
        "instruction tag",
        re.compile(
            r"<\s*/?\s*(?:ai|agent|assistant|llm|copilot|claude)[-_ ]?(?:instructions?|directive|"
            r"prompt|note|task)s?\s*>",
            _I,
        ),
        (("<",),),
    ),
)

ALL: tuple[Pattern, ...] = ENGLISH + MULTILINGUAL + TAGS
PIPE_GATES: Gates = (
    ("curl", "wget", "iwr", "irm", "invoke-", "fetch", "webclient"),
    ("|", "<(", "$(", "iex ", "iex(", "invoke-expression"),
)
