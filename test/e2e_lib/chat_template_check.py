#!/usr/bin/env python3
"""xfmr's chat templates against transformers': renders feature templates and
faithful copies of shipped ones (Llama 2/3/3.1, Mistral, Mistral v0.3 with
tools, Qwen2/2.5/3, Gemma/Gemma 3, Phi-3/3.5/4, DeepSeek, ChatML, Zephyr) on
conversations with system, user, assistant and tool messages, tool
definitions, tool calls, Unicode, emoji, quotes and newlines, with
tokenizer.apply_chat_template(tokenize=False) for add_generation_prompt
False and True, and compares the bytes TEMPLATE_PROGRAM (chat_template.c,
the runtime's C API) prints for the same variables. Where transformers
fails (raise_exception, a type error), the program must fail too, with the
template's message. Then checks that syntax errors, raise_exception,
runaway recursion and loops, and oversized output are one `error:` line.

  chat_template_check.py TEMPLATE_PROGRAM WORKDIR

Prints one PASS/FAIL line per case (a diff under a FAIL) and exits non-zero
if any failed.
"""
import difflib
import json
import os
import shutil
import subprocess
import sys

import jinja2
import transformers
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

# --- Feature templates: each exercises a corner of the language. ----------

FEATURES = {
    "whitespace control": r"""A  {%- if true %} B {% endif -%}  C
  {{- ' D ' -}}  E
{%+ if true %}F{% endif +%}
G {#- comment -#} H
    {%- for m in messages %}
    [{{ m.role }}]
    {%- endfor %}
I {{+ 'J' }} K
""",
    "trim and lstrip blocks": r"""{% for m in messages %}
    {% if m.role == 'user' %}
    user: {{ m.content }}
    {% else %}
	assistant: {{ m.content }}
    {% endif %}
{% endfor %}
  {# an indented comment #}
  {{ 'expressions keep their indent' }}
end {% if true %}inline{% endif %} tail
{% if add_generation_prompt %}
<generation>
{% endif %}
""",
    "comments and raw": r"""{# a comment with {{ braces }} and {% tags %} #}one
{#- multi
line -#}
two {% raw %}{{ not rendered }} {% if %}{% endraw %} three
    {% raw -%}
  raw stripped   {%- endraw %}
four""",
    "if elif else": r"""{% for m in messages %}{% if m.role == 'system' %}S{% elif m.role == 'user' and m.content|length > 3 %}U+{% elif m.role in ['user', 'tool'] %}u{% elif m.role not in ('user',) %}A{% else %}?{% endif %}{% endfor %}
{% if not messages %}none{% elif messages|length >= 2 and (messages[0].role != 'x' or false) %}many{% endif %}
{% if 1 < 2 < 3 %}chained{% endif %}{% if 3 > 2 > 2 %}no{% else %}yes{% endif %}""",
    "loop variables": r"""{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }} {{ loop.first }} {{ loop.last }} {{ loop.cycle('odd', 'even') }} prev={{ loop.previtem.role if loop.previtem is defined else '-' }} next={{ loop.nextitem.role if not loop.last else '-' }} depth={{ loop.depth }}|{{ loop.changed(m.role) }}
{% endfor %}{% for x in [1, 2] %}{% for y in 'ab' %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }};{% endfor %}""",
    "loop filter and else": r"""{% for m in messages if m.role == 'user' %}{{ loop.index }}:{{ m.content[:5] }}/{{ loop.length }} {% else %}no users{% endfor %}
{% for x in [] %}x{% else %}empty{% endfor %} {% for x in undefined_list %}x{% else %}undefined is empty{% endfor %}
{% for i in range(3) if i is odd %}{{ i }}{% endfor %}""",
    "break and continue": r"""{% for i in range(10) %}{% if i is even %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }},{% endfor %}
{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}{{ m.role }} {% endfor %}
{% for i in range(3) %}{% for j in range(3) %}{% if j == 1 %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}""",
    "unpacking": r"""{% for k, v in {'a': 1, 'b': [2, 3], 'c': none}.items() %}{{ k }}={{ v }};{% endfor %}
{% for k, v in {'z': 1, 'A': 2, 'b': 3}|dictsort %}{{ k }}{{ v }}{% endfor %} {% for k, v in {'x': 'y'}|items %}{{ k }}->{{ v }}{% endfor %}
{% for (a, b) in [(1, 2), [3, 4], 'xy'] %}{{ a }}{{ b }} {% endfor %}
{% set first, second = 'pq' %}{{ second }}{{ first }} {% set t = 1, 2 %}{{ t }} {% set one = 1, %}{{ one }}""",
    "scoping": r"""{% set x = 'outer' %}{% set ns = namespace(count=0, last=none) %}{% for m in messages %}{% set x = m.role %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{{ x }} {% endfor %}
{{ x }} {{ ns.count }} {{ ns.last }} {{ ns }}
{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}
{% set block %}  inner {{ x }} {% endset %}[{{ block }}] {% set shouted | upper | trim %} quiet {% endset %}[{{ shouted }}]
{% for i in range(2) %}{% if i == 0 %}{% set z = 'first only' %}{% endif %}[{{ z }}]{% endfor %}""",
    "macros": r"""{% macro greet(name, greeting='Hello', punctuation=greeting|length * '!') -%}
{{ greeting }}, {{ name }}{{ punctuation }}
{%- endmacro %}
{{ greet('Ana') }} {{ greet('Bo', 'Hi') }} {{ greet(name='Cy', punctuation='?') }}
{% macro collect() %}{{ varargs }}|{{ kwargs }}{% endmacro %}{{ collect(1, 'two', three=3) }}
{% macro countdown(n) %}{{ n }}{% if n > 0 %} {{ countdown(n - 1) }}{% endif %}{% endmacro %}{{ countdown(5) }}
{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ messages|length }}{% endcall %}
{% macro each(items) %}{% for item in items %}{{ caller(item, loop.index) }}{% endfor %}{% endmacro %}{% call(item, n) each(messages) %}{{ n }}={{ item.role }} {% endcall %}
{% macro missing(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacro %}{{ missing(1) }}""",
    "literals": r"""{{ 'single' }} {{ "double" }} {{ 'it\'s' }} {{ "say \"hi\"" }} {{ 'tab\there' }} {{ 'back\\slash' }} {{ '\u00e9\x41\101\U0001F600' }} {{ 'adjacent' ' strings' "joined" }}
{{ 42 }} {{ -7 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000_000 }} {{ 3.25 }} {{ 1e3 }} {{ 2.5E-3 }} {{ 1_0.5 }}
{{ true }} {{ false }} {{ True }} {{ False }} {{ none }} {{ None }}
{{ [1, 'two', 3.0, none, true, [], {}] }} {{ {'a': 1, 'b': 'x', 1: 'int key', none: 0} }} {{ (1,) }} {{ () }} {{ (1, 'a') }}
{{ ['it\'s', "quote\"d", 'both \' and "', 'new\nline', 'tab\t', 'bell\x07', 'é', 'nbsp\u00a0'] }}""",
    "arithmetic": r"""{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ 2 ** -1 }}
{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 123456789.123 }} {{ -0.0 }} {{ 3.0 }} {{ 1.5e300 * 1e10 }} {{ 2 ** 0.5 }}
{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 5 - 10 }} {{ -(3) }} {{ +4 }} {{ - 2 | abs }} {{ 1 + true }} {{ 10 - 2.5 }}
{{ 'ab' * 3 }} {{ 3 * 'xy' }} {{ [1] * 3 }} {{ [1, 2] + [3] }} {{ (1,) + (2,) }} {{ 'a' + 'b' }} {{ 'x' * 0 }}
{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == (1, 2) }} {{ [1] == (1,) }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ none == none }} {{ 1 != 2 }}""",
    "concatenation and slicing": r"""{{ 'a' ~ 1 ~ none ~ true ~ undefined_thing ~ [1] }} {{ messages[0].role ~ '/' ~ messages|length }}
{{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ 'abcdef'[::2] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[4:1:-1] }} {{ 'abcdef'[:-10] }} {{ 'abcdef'[10:] }}
{{ [1, 2, 3, 4, 5][1:-1] }} {{ [1, 2, 3][::-1] }} {{ (1, 2, 3)[1:] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3][5] }} {{ 'héllo wörld 👋'[1] }} {{ 'héllo wörld 👋'[-1] }} {{ 'héllo wörld 👋'[2:8] }}
{{ messages[-1]['content'][:10] }}|{{ messages[1:]|length }}|{{ messages[::-1][0].role }}""",
    "attributes and undefined": r"""{{ messages[0].role }} {{ messages[0]['role'] }} {{ messages[0].missing }}|{{ messages[0]['missing'] }}|{{ messages[0].missing is defined }} {{ messages[0].role is defined }}
{{ nothing }}|{{ nothing is defined }}|{{ nothing is undefined }}|{{ nothing|default('fallback') }}|{{ ''|default('empty', true) }}|{{ ''|d('kept') }}|{{ none|default('n') }}|{{ none|default('n', boolean=true) }}
{{ not nothing }} {{ nothing == nothing }} {{ nothing|length }} {{ nothing|list }} {{ nothing|join(',') }} {{ 'x' in nothing }} {{ nothing|string }}|{{ nothing|trim }}|
{% if messages[0].missing %}yes{% else %}no{% endif %} {% if nothing and nothing.attr %}unreached{% endif %} {{ messages.0.role }} {{ [[1, 2]].0.1 }}
{{ 'abc'.nonexistent }}|{{ 'abc'['nope'] }}|{{ [1]['append'] }}|{{ none.attr }}|{{ messages[0].items is defined }}""",
    "tests": r"""{{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ 1 is float }} {{ 'a' is string }} {{ 1 is string }}
{{ {} is mapping }} {{ [] is mapping }} {{ [] is sequence }} {{ 'x' is sequence }} {{ {} is sequence }} {{ 1 is sequence }} {{ 'x' is iterable }} {{ 1 is iterable }} {{ none is iterable }}
{{ none is none }} {{ 0 is none }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }} {{ 1 is boolean }}
{{ 3 is odd }} {{ 3 is even }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 2 is eq 2 }} {{ 2 is equalto 3 }} {{ 2 is ne 3 }} {{ 2 is lt 3 }} {{ 2 is gt 3 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 2 is greaterthan 1 }} {{ 2 is lessthan 1 }}
{{ 'ab' is lower }} {{ 'Ab' is lower }} {{ 'AB' is upper }} {{ '1' is upper }} {{ 1 is in [1, 2] }} {{ 'b' is in 'abc' }} {{ range is callable }} {{ 'x' is callable }} {{ none is sameas none }} {{ true is sameas true }}
{{ 1 is not string }} {{ messages is not mapping }} {{ messages[0] is mapping }} {{ messages[0].content is string }} {{ 'upper' is filter }} {{ 'nofilter' is filter }} {{ 'odd' is test }}""",
    "string methods": r"""[{{ '  pad  '.strip() }}][{{ '  pad  '.lstrip() }}][{{ '  pad  '.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\n\t tabs \u3000'.strip() }}]
{{ 'a b  c '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ '  x  y  '.split(none, 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'a b c'.rsplit(none, 1) }} {{ ''.split() }} {{ ''.split(',') }}
{{ 'Hello'.startswith('He') }} {{ 'Hello'.startswith(('x', 'H')) }} {{ 'Hello'.endswith('lo') }} {{ 'Hello'.endswith('x') }}
{{ 'hello wORLD'.upper() }} {{ 'HeLLo ÉTÉ'.lower() }} {{ 'hello world-wide x1y'.title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'ß straße'.upper() }} {{ 'ΟΔΟΣ'.lower() }}
{{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abc'.find('z') }} {{ 'aXbX'.count('X') }} {{ 'héllo'.find('l') }} {{ 'abcabc'.find('b', 2) }}
{{ ', '.join(['a', 'b', 'c']) }} {{ ''.join('xyz') }} {{ 'line1\nline2\r\nline3'.splitlines() }} {{ 'x'.center(5, '*') }}|{{ 'x'.ljust(3) }}|{{ 'x'.rjust(3, '-') }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}
{{ 'key=value=x'.partition('=') }} {{ 'key=value=x'.rpartition('=') }} {{ 'prefix-body'.removeprefix('prefix-') }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }} {{ 'ABC'.isupper() }}
{{ '{} and {}'.format('x', 'y') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}: {n:>5}|{f:.2f}|{n:05d}|{s!r}'.format(name='k', n=42, f=3.14159, s='q') }} {{ '{:,}'.format(1234567) }} {{ '{:^9}'.format('mid') }}""",
    "dict methods": r"""{{ {'a': 1, 'b': 2}.keys()|list }} {{ {'a': 1, 'b': 2}.values()|list }} {{ {'a': 1}.items()|list }} {{ {'a': 1}.get('a') }} {{ {'a': 1}.get('z') }} {{ {'a': 1}.get('z', 'dflt') }}
{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %} {{ {'x': 1}|length }} {{ 'x' in {'x': 1} }} {{ 1 in {'x': 1} }} {{ dict(a=1, b=[2]) }} {{ dict([('k', 'v')], z=0) }} {{ dict({'m': 1}) }}
{% set d = {'role': 'r', 'content': 'c'} %}{{ d.role }}{{ d['content'] }} {{ d.items|string|length > 0 }} {{ d|list }} {{ d|first }} {{ d|last }} {{ d|tojson }}""",
    "text filters": r"""[{{ '  both  '|trim }}][{{ '..x..'|trim('.') }}] {{ 'MiXed'|upper }} {{ 'MiXed'|lower }} {{ 'hello wORLD-foo (bar) {baz} [q] <r>'|title }} {{ 'hELLO wORLD'|capitalize }}
{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '-') }} {{ 'x'|center(7) }}|{{ 'abc'|center(6) }}|{{ 'one two  three'|wordcount }} {{ 'héllo'|length }} {{ 'héllo'|count }}
{{ 'line1\nline2\n\nline4'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'a\nb'|indent('> ') }}|{{ 'single'|indent(first=true) }}
{{ '<a href="x">&\'</a>'|escape }} {{ '<b>'|e }} {{ '<b>'|safe }} {{ 42|string }} {{ [1, 'a']|string }} {{ 'abc'|reverse }} {{ 'abc'|first }} {{ 'abc'|last }} {{ 'abc'|list }}
{{ '%s has %d items (%.2f%%) %r'|format('cart', 3, 12.345, 'x') }} {{ '%-5s|%5s|%05d|%x|%o|%e|%g'|format('ab', 'cd', 42, 255, 8, 1234.5, 0.0001) }} {{ '%(a)s=%(b)s'|format(a=1, b=2) }} {{ '%s' % 'mod' }} {{ '%d-%s' % (1, 'x') }}
{{ 'The quick brown fox jumps over the lazy dog'|truncate(20) }} {{ 'short'|truncate(20) }} {{ 'The quick brown fox jumps'|truncate(10, true) }}""",
    "sequence filters": r"""{{ messages|length }} {{ messages|count }} {{ messages|first|tojson }} {{ (messages|last).role }} {{ []|first }}|{{ messages|map(attribute='role')|join(', ') }} {{ messages|join('|', attribute='role') }}
{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'c', 'a']|sort }} {{ ['b', 'A', 'c', 'a']|sort(case_sensitive=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|list }} {{ [{'a': 2, 'b': 1}, {'a': 1, 'b': 2}, {'a': 1, 'b': 1}]|sort(attribute='a,b') }}
{{ [1, 2, 1, 3, 2]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [3, 1, 2]|reverse|list }} {{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|min }} {{ []|max }}| {{ [{'n': 2}, {'n': 5}]|max(attribute='n') }}
{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [{'n': 2}, {'n': 5}]|sum(attribute='n') }} {{ [1, 2]|sum(start=10) }} {{ [[1], [2]]|sum(start=[]) }} {{ range(7)|batch(3)|list }} {{ range(5)|batch(2, 'x')|list }} {{ range(7)|slice(3)|list }}
{{ ['a', 'b']|map('upper')|list }} {{ [{'a': 1}, {}]|map(attribute='a', default=0)|list }} {{ ['1', '2']|map('int')|sum }} {{ [' a ', 'b ']|map('trim')|join }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 0, none, 2]|select|list }} {{ [1, 2, 3]|reject('gt', 1)|list }}
{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }} {{ messages|selectattr('content')|list|length }} {{ [{'a': {'b': 1}}, {'a': {'b': 0}}]|selectattr('a.b')|list }} {{ messages|selectattr('role', 'in', ['system', 'tool'])|list|length }}
{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }} {{ {'k': 'v'}|items|list }} {{ 'xyz'|list }} {{ (1, 2)|list }}
{% if messages|selectattr('role', 'equalto', 'nobody') %}generators are true{% endif %} {{ messages|map(attribute='role')|list|tojson }}""",
    "number filters": r"""{{ '42'|int }} {{ '  42  '|int }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ '1_000'|int }} {{ 3.99|int }} {{ -3.99|int }} {{ true|int }} {{ none|int }}
{{ '1.5'|float }} {{ '1e3'|float }} {{ 'x'|float }} {{ 'x'|float(2.5) }} {{ 3|float }} {{ ' -2 '|float }} {{ -5|abs }} {{ -2.5|abs }}
{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(3) }} {{ 5|round }} {{ 1234.5678|round(-2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ -0.5|round }}
{{ 1 is number and 1.0 is number }} {{ (10 / 4)|round(1) }} {{ '%.3f'|format(2/3) }} {{ 10 // 3 * 3 + 10 % 3 }}""",
    "tojson": r"""{{ messages|tojson }}
{{ tools|tojson }}
{{ {'unicode': 'héllo 世界 👋', 'quotes': 'say "hi" \'there\'', 'slash': 'a/b\\c', 'ctrl': '\n\t\r\b\f\x01\x7f', 'nums': [1, -2, 3.0, 0.1, 1e20, 1e-7], 'bools': [true, false, none]}|tojson }}
{{ {'nested': {'list': [1, {'deep': []}], 'empty': {}}}|tojson(indent=2) }}
{{ [1, [2, 3]]|tojson(indent=4) }} {{ []|tojson(indent=2) }} {{ {}|tojson(indent=2) }} {{ 'string'|tojson }} {{ 3|tojson }} {{ none|tojson }}
{{ {'b': 1, 'a': {'d': 1, 'c': 2}}|tojson(sort_keys=true) }} {{ {'é': 'ü'}|tojson(ensure_ascii=true) }} {{ {'a': [1, 2]}|tojson(separators=(',', ':')) }} {{ (1, 2)|tojson }} {{ {1: 'x', true: 'y'}|tojson }}
{{ {'a': 'x'}|tojson(indent='\t') }}""",
    "python printing": r"""{{ messages }}
{{ messages[0] }}
{{ tools }}
{{ ["it's", 'say "x"', 'mixed \' and "', 'back\\slash', 'uni é 世界 👩‍👩‍👧', 'ctrl \x00\x1f\x7f\x85', 'wide\u2028'] }}
{{ {'k': (1, 2), 'n': none, 'f': [1.0, 2.5e-8, 1e22]} }} {{ [[], [[]], {}] }} {{ (none,) }}""",
    "namespace": r"""{% set ns = namespace(found=false, items=[], total=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.items = ns.items + [m.content[:3]] %}{% endif %}{% set ns.total = ns.total + m.content|length %}{% endfor %}{{ ns.found }} {{ ns.items }} {{ ns.total }}
{% set ns2 = namespace({'a': 1}, b=2) %}{{ ns2.a }}{{ ns2.b }}{{ ns2.c }}|{{ ns2.c is defined }} {{ ns2 }}""",
    "globals": r"""{{ range(5)|list }} {{ range(2, 8, 2)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }} {{ range(3)|length }}
{% set comma = joiner(', ') %}{% for m in messages %}{{ comma() }}{{ m.role }}{% endfor %}
{% set colors = cycler('red', 'green') %}{{ colors.next() }} {{ colors.next() }} {{ colors.next() }} {{ colors.current }}
{{ strftime_now('%Y')|length }} {{ strftime_now('%Y-%m') == strftime_now('%Y') ~ '-' ~ strftime_now('%m') }} {{ raise_exception is defined }} {{ namespace is callable }}
{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ documents is none }}""",
    "conditional expressions": r"""{{ 'yes' if messages else 'no' }} {{ 'a' if false else 'b' if true else 'c' }} [{{ 'only' if false }}] {{ (messages|length if messages else 0) + 1 }}
{{ 'x' if 0 else 'y' }} {{ messages[0].role|upper if messages[0].role is defined }} {{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'fallback' }} {{ none or [] or 'last' }} {{ not 0 }}""",
    "filter, with and generation blocks": r"""{% filter upper %}shout {{ messages|length }}{% endfilter %} {% filter trim|replace(' ', '_') %}  a b c  {% endfilter %}
{% with a = 1, b = messages|length %}{{ a + b }}{% endwith %}{{ a }}
{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}<{{ m.content }}>{% endgeneration %}{% else %}[{{ m.role }}]{% endif %}{% endfor %}""",
    "recursive loops": r"""{% set tree = [{'name': 'root', 'children': [{'name': 'a', 'children': []}, {'name': 'b', 'children': [{'name': 'b1', 'children': []}]}]}] %}{% for node in tree recursive %}{{ node.name }}@{{ loop.depth }}{% if node.children %}({{ loop(node.children) }}){% endif %}{% if not loop.last %},{% endif %}{% endfor %}""",
    "print statement and bos/eos": r"""{{ bos_token }}{% for m in messages %}{% print m.role ~ ':' %} {{ m.content }}{{ eos_token if m.role == 'assistant' }}
{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}""",
}

# --- Shipped templates, as their tokenizer_config.json has them. ----------

REAL = {
    "Llama 2": r"""{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}""",
    "Llama 3": r"""{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %}""",
    "Llama 3.1": r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
""",
    "Mistral": r"""{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}""",
    "Mistral v0.3 with tools": r"""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
""",
    "Qwen2": r"""{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
You are a helpful assistant.<|im_end|>
' }}{% endif %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}""",
    "Qwen2.5": r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
""",
    "Qwen3": r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}""",
    "Gemma": r"""{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %}""",
    "Gemma 3": r"""{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '

' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model
'}}
{%- endif -%}
""",
    "Phi-3": r"""{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %}""",
    "Phi-3.5": r"""{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %}""",
    "Phi-4": r"""{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'assistant') %}{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}""",
    "DeepSeek LLM": r"""{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '

' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + '

' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}""",
    "DeepSeek R1": r"""{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- set ns.is_first = true -%}{%- else %}{{'\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor %}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\n'}}{% endif %}""",
    "ChatML": r"""{% for message in messages %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}""",
    "Zephyr": r"""{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}""",
}

# --- Conversations. --------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city, in °C or °F.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. \"São Paulo\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the web.\nReturns the top results.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer", "default": 5},
            "safe": {"type": "boolean"}, "boost": {"type": "number", "minimum": 0.5}},
            "required": ["query"]},
        "return": {"type": "array"}}},
]

CONVERSATIONS = {
    "basic": {"messages": [
        {"role": "user", "content": "Hello! How are you?"},
        {"role": "assistant", "content": "I'm fine, thanks. And you?"},
        {"role": "user", "content": "Great."}]},
    "system": {"messages": [
        {"role": "system", "content": "You are a helpful assistant.\nAnswer briefly.  "},
        {"role": "user", "content": "  What's the capital of France?\n"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Japan?"}]},
    "unicode": {"messages": [
        {"role": "system", "content": "Réponds en français — s'il te plaît. 日本語もOK"},
        {"role": "user", "content": "naïve café 😀🚀 👩‍👩‍👧‍👦 🇫🇷\ttab \"quoted\" and 'single' \\backslash\\ </s> <|im_end|>"},
        {"role": "assistant", "content": "Съешь же ещё этих мягких французских булок!\n\nשלום עולם. مرحبا"},
        {"role": "user", "content": "ΟΔΟΣ straße İstanbul\r\nwindows line\n\n\ntrailing   "}]},
    "tools": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in São Paulo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call12345", "type": "function", "function": {
                "name": "get_weather", "arguments": {"city": "São Paulo", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
         "content": "{\"temperature\": 22.5, \"condition\": \"sunny ☀️\"}"},
        {"role": "assistant", "content": "It is 22.5 °C and sunny."},
        {"role": "user", "content": "Thanks!"}]},
    "tool calls as strings": {"tools": TOOLS[:1], "messages": [
        {"role": "user", "content": "Weather in Oslo and Lima?"},
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [
            {"id": "abcdefghi", "type": "function", "function": {
                "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
            {"id": "jklmnopqr", "type": "function", "function": {
                "name": "get_weather", "arguments": "{\"city\": \"Lima\"}"}}]},
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "-3"},
        {"role": "tool", "tool_call_id": "jklmnopqr", "content": "19"},
        {"role": "assistant", "content": "Oslo: -3 °C, Lima: 19 °C."},
        {"role": "user", "content": "<tool_response>spoof</tool_response>"}]},
    "reasoning": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "add three twice"}]},
}

# Which conversations each shipped template is rendered with, and extra
# variables (transformers passes them to the template as they are).
REAL_CASES = [
    ("Llama 2", ["basic", "system", "unicode"], {}),
    ("Llama 3", ["basic", "system", "unicode", "tools"], {}),
    ("Llama 3.1", ["basic", "system", "unicode", "tools"], {}),
    ("Llama 3.1", ["tools"], {"tools_in_user_message": False, "date_string": "01 Jan 2025"}),
    ("Llama 3.1", ["tools"], {"builtin_tools": ["get_weather", "code_interpreter"]}),
    ("Mistral", ["basic", "system", "unicode"], {}),
    ("Mistral v0.3 with tools", ["basic", "system", "tools", "tool calls as strings"], {}),
    ("Qwen2", ["basic", "system", "unicode"], {}),
    ("Qwen2.5", ["basic", "system", "unicode", "tools", "tool calls as strings"], {}),
    ("Qwen3", ["basic", "system", "tools", "tool calls as strings", "reasoning"], {}),
    ("Qwen3", ["reasoning"], {"enable_thinking": False}),
    ("Gemma", ["basic", "system", "unicode"], {}),
    ("Gemma 3", ["basic", "system", "unicode"], {}),
    ("Phi-3", ["basic", "system", "unicode"], {}),
    ("Phi-3.5", ["basic", "system", "unicode"], {}),
    ("Phi-4", ["basic", "system", "unicode"], {}),
    ("DeepSeek LLM", ["basic", "system", "unicode"], {}),
    ("DeepSeek R1", ["basic", "system", "tools", "reasoning"], {}),
    ("ChatML", ["basic", "system", "unicode", "tools"], {}),
    ("Zephyr", ["basic", "system", "unicode"], {}),
]

FEATURE_CONVERSATION = {"tojson": "tools", "python printing": "tools"}

# Templates the program must refuse, and what its one error line must say.
ERRORS = [
    ("unclosed for", "line 1\n{% for m in messages %}\n{{ m.role }}",
     ["line 2", "unclosed '{% for %}'"]),
    ("unknown tag", "{% frobnicate %}", ["line 1", "unknown tag 'frobnicate'"]),
    ("stray endif", "{% for m in messages %}{% endif %}{% endfor %}",
     ["unexpected '{% endif %}'"]),
    ("bad expression", "{{ 1 + }}", ["line 1", "expected an expression"]),
    ("unterminated string", "ok\n{{ 'abc }}", ["line 2", "unterminated string"]),
    ("raise_exception", "{% for m in messages %}{% if m.role == 'user' %}\n"
     "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
     ["line 2", "Only user and assistant roles are supported!"]),
    ("recursive macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
     ["nested more than", "macro calling itself"]),
    ("nested parentheses", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
     ["nested more than"]),
    ("runaway loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
     "{% endfor %}", ["loop iterations"]),
    ("huge output", "{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}",
     ["exceeds 64 MiB"]),
    ("huge string", "{{ 'x' * 100000000 }}", ["more than 64 MiB"]),
    ("huge range", "{{ range(100001)|length }}", ["Range too big"]),
    ("undefined attribute", "{{ nothing.attr }}", ["'nothing' is undefined"]),
    ("unknown filter", "{{ 'x'|frobnicate }}", ["no filter named 'frobnicate'"]),
    ("not callable", "{{ messages() }}", ["'list' object is not callable"]),
    ("unsafe method", "{% set l = [] %}{{ l.append(1) }}", ["unsafe"]),
    ("bad operands", "{{ 'a' + 1 }}", ["can only concatenate str"]),
]


def make_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3, "hello": 4}
    model = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=model, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>")


class ContextRecorder:
    """Records the variables transformers renders the template with."""

    def __init__(self):
        self.contexts = []
        self.render = jinja2.environment.Template.render
        recorder = self

        def render(template, *args, **kwargs):
            recorder.contexts.append(dict(*args, **kwargs))
            return recorder.render(template, *args, **kwargs)

        jinja2.environment.Template.render = render


def run_program(program, workdir, source, context):
    template_path = os.path.join(workdir, "template.jinja")
    context_path = os.path.join(workdir, "context.json")
    with open(template_path, "w", encoding="utf-8", newline="") as f:
        f.write(source)
    with open(context_path, "w", encoding="utf-8") as f:
        json.dump(context, f, ensure_ascii=False)
    return subprocess.run([program, template_path, context_path], capture_output=True,
                          timeout=120)


def diff(expected, got):
    lines = difflib.unified_diff(expected.splitlines(True), got.splitlines(True), "transformers",
                                 "xfmr", lineterm="")
    return "".join("\n  " + repr(line) for line in lines)


def check_render(program, workdir, tokenizer, recorder, name, source, conversation, extra):
    problems, raised = [], set()
    for generation_prompt in (False, True):
        recorder.contexts.clear()
        try:
            expected = tokenizer.apply_chat_template(
                conversation["messages"], tools=conversation.get("tools"), chat_template=source,
                tokenize=False, add_generation_prompt=generation_prompt, **extra)
            failure = None
        except Exception as e:  # the template itself failed: so must the program
            expected, failure = None, e
        if not recorder.contexts:
            problems.append(f"add_generation_prompt={generation_prompt}: transformers did not "
                            f"render ({failure!r})")
            continue
        run = run_program(program, workdir, source, recorder.contexts[0])
        where = f"add_generation_prompt={generation_prompt}"
        if failure is not None:
            message = str(failure)
            raised.add(message)
            stderr = run.stderr.decode(errors="replace")
            if run.returncode == 0:
                problems.append(f"{where}: transformers failed ({message}) but the program "
                                f"rendered {run.stdout[:200]!r}")
            elif isinstance(failure, jinja2.TemplateError) and type(failure) is jinja2.TemplateError \
                    and message not in stderr:
                problems.append(f"{where}: the error does not carry {message!r}: {stderr!r}")
            continue
        if run.returncode != 0:
            problems.append(f"{where}: the program failed: {run.stderr.decode(errors='replace')}")
            continue
        got = run.stdout.decode("utf-8", errors="replace")
        if got != expected:
            problems.append(f"{where}: output differs:" + diff(expected, got))
    print(f"{'PASS' if not problems else 'FAIL'}: {name}"
          + "".join(f" (both raise: {message})" for message in sorted(raised))
          + "".join("\n  " + p for p in problems))
    return not problems


def check_error(program, workdir, name, source, expected):
    run = run_program(program, workdir, source, {"messages": CONVERSATIONS["basic"]["messages"]})
    stderr = run.stderr.decode(errors="replace")
    lines = stderr.splitlines()
    problems = []
    if run.returncode == 0:
        problems.append(f"rendered instead of failing: {run.stdout[:200]!r}")
    elif len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append(f"not one 'error:' line: {stderr[:500]!r}")
    else:
        problems += [f"{lines[0]!r} does not say {text!r}" for text in expected
                     if text not in lines[0]]
    print(f"{'PASS' if not problems else 'FAIL'}: error {name}"
          + ("" if problems else f" ({lines[0][len('error: '):][:100]})")
          + "".join("\n  " + p for p in problems))
    return not problems


def main():
    program, workdir = sys.argv[1], sys.argv[2]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    transformers.logging.set_verbosity_error()
    tokenizer = make_tokenizer()
    recorder = ContextRecorder()
    ok = True
    for name, source in FEATURES.items():
        conversation = CONVERSATIONS[FEATURE_CONVERSATION.get(name, "system")]
        ok &= check_render(program, workdir, tokenizer, recorder, f"feature {name}", source,
                           conversation, {})
    for template, conversations, extra in REAL_CASES:
        for conversation in conversations:
            label = f"{template} / {conversation}" + "".join(
                f", {key}={value!r}" for key, value in extra.items())
            ok &= check_render(program, workdir, tokenizer, recorder, label, REAL[template],
                               CONVERSATIONS[conversation], extra)
    for name, source, expected in ERRORS:
        ok &= check_error(program, workdir, name, source, expected)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
