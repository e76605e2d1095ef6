"""Chat templates written for the tests (not copies of the models' files):
they use the constructs of the Llama-3.x, DeepSeek-V3 and SmolLM2/ChatML
templates (namespace state, message slicing, tool JSON with indent, string
splitting, raise_exception, loop.first, trim, fullwidth marker tokens)."""

LLAMA3_STYLE = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

DEEPSEEK_V3_STYLE = """{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}\
{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}\
{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}\
{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}\
{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}\
{{ bos_token }}{{ ns.system_prompt }}\
{%- for message in messages %}\
{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}\
{%- if message['role'] == 'assistant' and 'tool_calls' in message %}{%- set ns.is_tool = false -%}\
{%- for tool in message['tool_calls'] %}\
{%- if not ns.is_first %}{%- if message['content'] is none %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}\
{%- else %}{{'<｜Assistant｜>' + message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}\
{%- set ns.is_first = true -%}\
{%- else %}{{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}\
{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}\
{%- if message['role'] == 'assistant' and 'tool_calls' not in message %}\
{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}\
{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}\
{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}\
{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}\
{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}\
{%- else %}{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}\
{%- endfor -%}\
{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}\
{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}"""

CHATML_STYLE = """{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}\
{{ '<|im_start|>system\\nYou are a helpful AI assistant<|im_end|>\\n' }}{% endif %}\
{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"""

# Odds and ends the real templates may use: filters, tests, loop.*, macros, whitespace.
CONSTRUCTS = """{#- a comment -#}
{% macro show(m, idx=0) -%}
  [{{ idx }}:{{ m.role | upper }}{% if m.name is defined %}({{ m.name }}){% endif %}]
{%- endmacro %}
{% set ns = namespace(n=0, roles=[]) %}
{% for m in messages %}
  {{ show(m, loop.index0) }} {{ loop.revindex }}/{{ loop.length }}{{ ' first' if loop.first }}{{ ' last' if loop.last }}
  {%- set ns.n = ns.n + (m.content | string | length) %}
  {%- set ns.roles = ns.roles + [m.role] %}
  {%- if m.content is string and m.content.startswith('Hi') %} greets{% endif %}
  {%- if m.tool_calls is defined %}
    {%- for c in m.tool_calls %}
 call {{ c.function.name }} {{ c.function.arguments | tojson(ensure_ascii=True) }} {{ c.function.arguments is string }}
    {%- endfor %}
  {%- endif %}
{% endfor %}
roles={{ ns.roles | unique | join(',') }} total={{ ns.n }} {{ messages | map(attribute='role') | select('equalto', 'user') | list | length }} users
{% if tools %}{% for t in tools %}{{ t.function.name }}:{{ t.function.parameters | tojson(sort_keys=True) }}{{ t | tojson(separators=(',', ':')) | length }}
{% endfor %}{% endif %}
{{- (messages | last).role if messages else 'none' }} {{ messages[-1:] | length }} {{ 'x' * 3 }} {{ 10 // 3 }} {{ 2.5 | round }}
"""

TEMPLATES = {"llama3_style": LLAMA3_STYLE, "deepseek_v3_style": DEEPSEEK_V3_STYLE, "chatml_style": CHATML_STYLE,
             "constructs": CONSTRUCTS}
