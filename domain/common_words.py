"""Common English words: a capitalised word that is one of these at a sentence's start is no name.

Two sets, both lower-case and apostrophes as ``'``:

* :data:`NEVER_NAMES` — closed-class words (pronouns, determiners, auxiliaries, conjunctions,
  prepositions), interjections, greetings, frequent verbs and adverbs, the calendar's names and
  a few words chat capitalises anywhere ("Mum", "TV"). Never a name, wherever they stand (a
  lone "Mum" mid-sentence included); between names they end a span.
* :data:`COMMON_WORDS` — frequent nouns and adjectives. At a sentence's start such a word alone is
  no name ("Honey and lemon."), but it may open a longer name ("Glass Houses", "Paper Foxes").
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEVER_NAMES = _words("""
a about above across after afterwards again against ago ah aha ahead all almost alone along already
also although always am among an and another any anybody anyone anything anyway anywhere apparently
are aren't around as at aw away aww awesome
back basically be because been before being below beside besides best better between beyond both
brilliant but by bye
can can't cannot cheers congrats congratulations could couldn't
dad dad's damn dear definitely did didn't do does doesn't doing don't done down during
each either else enough especially even ever every everybody everyone everyone's everything
everywhere exactly
fair fine finally for from further
gah gee god goodbye goodnight gosh got gotta great
ha had hadn't haha hahaha has hasn't have haven't having he he'd he'll he's hello her here here's
hers herself hey hi him himself his hiya hm hmm honestly hooray how how's however huh
i i'd i'll i'm i've if in indeed instead into is isn't it it'd it'll it's its itself
just
kind kinda
later least less let let's like likely lol lots
maybe me meanwhile might mine more morning most mostly much mum mum's must my myself
nah namely near nearly neither never nevertheless next nice no nobody none nope nor not nothing now
nowhere
of off oh oi ok okay on once one only onto ooh oops or other others otherwise ouch ought our ours
ourselves out over own
perhaps please plus pretty probably
quite
rather re really right
same seriously shall she she'd she'll she's should shouldn't since so some somebody someday somehow
someone something sometimes somewhat somewhere soon sorry still such sure
than thank thanks that that'd that'll that's the their theirs them themselves then there there's
therefore these they they'd they'll they're they've thing things this those though through thus
till to today together tomorrow tonight too totally toward towards
ugh uh um umm under unless unfortunately until up upon us usually
very via
wait was wasn't we we'd we'll we're we've well were weren't what what's whatever when whenever where
where's whereas wherever whether which while who who's whoa whoever whole whom whose why will with
within without won't wow would wouldn't
yay yeah yep yes yesterday yet you you'd you'll you're you've your yours yourself yourselves yup
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
monday tuesday wednesday thursday friday saturday sunday
mondays tuesdays wednesdays thursdays fridays saturdays sundays
mon tue tues wed thu thur thurs fri sat sun
tv ok omg btw lmao fyi asap
ask asked asking bake baked be became become becoming began begin bought bring brought call called
calling came catch caught change changed check checked come comes coming cook cooked could cut
decided did do doing drink drank drive drove dropped eat ate enjoy enjoyed fall fell feel feeling
felt find finding found finish finished finishing forgot forget gave get gets getting give given
giving go goes going gone got guess guessing had hate hated have having hear heard help helped hold
hope hoping keep keeping kept knew know knowing learn learned learning leave leaving left lend lent let listen
listened live lived living look looked looking looks lost love loved loves loving made make makes
making managed mean means meant meet meeting met mind miss missed missing moved moving need needed
needs noticed opened paid passed pay picked play played playing put ran read reading remember
reminds ring run running said saw say saying says see seeing seem seems seen sent send set show
showed sign signed sit sleep sleeping slept sound sounds spend spending spent start started
starting stay stayed stop stopped take taken takes taking talk talked talking taught tell telling
think thinking thought threw told took tried try trying turn turned use used visit visited wait
waited walk walked want wanted wants was watch watched watching went were wish wished wonder
worked working worry write wrote
""")

COMMON_WORDS = _words("""
able absolutely actually amazing animal answer anniversary apartment art autumn awful bad badly bag
baby bank bath battery beach beautiful bed big bike bird birthday bit black blue boat body book
books boss bottle box boxes boy brave bread breakfast bright brother brothers bucket bus busy cake
car card career careful cat cheap chicken child children city class classic clean clear close
coffee cold colour commute commuting cool cousin crazy cup cute daily dark date daughter day days
dead deal deep dinner dog door double dream dress drinks early easy empty end evening exciting
eye face family fancy fast father favourite fire fish flat flatmate floor flowers food foot free
fresh friday friend friends front fun funny game garden gift girl glass gold good gorgeous green
ground group guy hair half hall hand happy hard head healthy heart heavy high holiday home honey
hospital hot hour hours house huge ice idea important job kid kids kitchen lamb large late leftover
letter life light little lovely low lucky last first long lunch mad main man market meal middle minute money month
moon mother mountain music name neighbour neighbours new news night nightmare noise normal nurse
office old open orange paper park party past people perfect person phone photo picture place plan
plans plant plate point poor possible present pretty proper quick quiet rain ready real red
restaurant results road room round sad safe salt school sea season second short shop side sign
simple sister sisters sky slow small snow soft song soup special spring star station street strong
summer sun super sweet table tea team terrible thing third tiny tired top town traffic train tree
trip true usual wall war warm water weather week weekend weird weirdly welcome white wild window
wine winter woman women wonderful word work world worse worst wrong year years young
one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred
""")
