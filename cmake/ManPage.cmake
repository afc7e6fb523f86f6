# ManPage.cmake - renders zkelect.1 (cmake -P, run by the build):
#   cmake -DREADME=README.md -DHEAD=docs/zkelect.1.head.md -DLOWDOWN=lowdown
#         -DVERSION=x.y.z -DOUT=zkelect.1 -P ManPage.cmake
# The page is HEAD (metadata, NAME, SYNOPSIS, DESCRIPTION) followed by every
# part of README between "<!-- man:begin -->" and "<!-- man:end -->", one
# heading level up ("## X" becomes a section, in capitals), links to anchors
# of the README reduced to their text. The README is the one source.
cmake_minimum_required(VERSION 3.18)
foreach(v README HEAD LOWDOWN VERSION OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ManPage.cmake: -D${v}=... missing")
  endif()
endforeach()

file(READ "${README}" readme)
file(READ "${HEAD}" md)
string(REPLACE "@VERSION@" "${VERSION}" md "${md}")

set(parts 0)
while(TRUE)
  string(FIND "${readme}" "<!-- man:begin -->" b)
  if(b EQUAL -1)
    break()
  endif()
  math(EXPR b "${b} + 18")
  string(SUBSTRING "${readme}" ${b} -1 readme)
  string(FIND "${readme}" "<!-- man:end -->" e)
  if(e EQUAL -1)
    message(FATAL_ERROR "${README}: <!-- man:begin --> without <!-- man:end -->")
  endif()
  string(SUBSTRING "${readme}" 0 ${e} part)
  string(APPEND md "\n${part}\n")
  math(EXPR parts "${parts} + 1")
endwhile()
if(parts EQUAL 0)
  message(FATAL_ERROR "${README}: no <!-- man:begin --> ... <!-- man:end --> part")
endif()

# "## Title" -> "# TITLE", "### Sub" -> "## Sub" (section, subsection)
set(out "")
while(TRUE)
  string(REGEX MATCH "\n## [^\n]*" h "${md}")
  if(h STREQUAL "")
    break()
  endif()
  string(FIND "${md}" "${h}" at)
  string(SUBSTRING "${md}" 0 ${at} before)
  string(LENGTH "${h}" hl)
  math(EXPR after_at "${at} + ${hl}")
  string(SUBSTRING "${md}" ${after_at} -1 md)
  string(SUBSTRING "${h}" 4 -1 title)
  string(TOUPPER "${title}" title)
  string(APPEND out "${before}\n# ${title}")
endwhile()
string(APPEND out "${md}")
string(REPLACE "\n### " "\n## " out "${out}")
# [text](#anchor), [text](path/in/repo) -> text: links inside the README or
# the repository mean nothing in man (URLs, with a colon, stay)
string(REGEX REPLACE "\\[([^]]*)\\]\\([^):]*\\)" "\\1" out "${out}")

get_filename_component(dir "${OUT}" DIRECTORY)
set(src "${OUT}.md")
file(WRITE "${src}" "${out}")
# no smart typography: "--zk" must stay two hyphens, not an en dash
execute_process(COMMAND "${LOWDOWN}" -s -Tman --out-no-smarty "${src}"
                OUTPUT_VARIABLE roff RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lowdown failed (${rc}) on ${src}: ${err}")
endif()
# Tables: lowdown gives every column the same width ("expand"); let the
# short columns keep their natural width and the last one take the rest.
string(REPLACE "tab(|) expand allbox;" "tab(|) allbox;" roff "${roff}")
string(REGEX REPLACE "\n(l( l)*) l\\.\n" "\n\\1 lx.\n" roff "${roff}")
# tables are tbl(1) input: the first line tells man(1) to run tbl
file(WRITE "${OUT}" "'\\\" t\n${roff}")
